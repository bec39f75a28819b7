//! Endpoint URLs: never a panic; what is accepted is stored in a form that is
//! accepted again as itself; with private destinations refused, an accepted
//! IP literal is a public address.
#![no_main]

use std::net::IpAddr;

use hookline_core::destination::{check_url, is_public};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &str| {
    for allow_private in [false, true] {
        let Ok(stored) = check_url(raw, allow_private) else {
            continue;
        };
        assert_eq!(
            check_url(&stored, allow_private).as_deref(),
            Ok(stored.as_str())
        );
        if !allow_private {
            let ip = match url::Url::parse(&stored).unwrap().host() {
                Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
                Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
                _ => None,
            };
            if let Some(ip) = ip {
                assert!(is_public(ip), "{raw:?} -> {stored:?}");
            }
        }
    }
});

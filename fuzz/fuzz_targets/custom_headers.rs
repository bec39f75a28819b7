//! An endpoint's custom headers: never a panic; what is accepted is lower-cased,
//! without duplicates, none of Hookline's own, and accepted again as itself.
#![no_main]

use hookline_core::custom_headers::check;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|headers: Vec<(String, String)>| {
    if let Ok(checked) = check(&headers) {
        assert_eq!(checked.len(), headers.len());
        for (i, (name, value)) in checked.iter().enumerate() {
            assert_eq!(*name, name.to_ascii_lowercase());
            assert!(!name.starts_with("webhook-") && !name.starts_with("hookline-"));
            assert!(!value.is_empty() && !value.contains(['\r', '\n']));
            assert!(checked[..i].iter().all(|(other, _)| other != name));
        }
        assert_eq!(check(&checked), Ok(checked.clone()));
    }
});

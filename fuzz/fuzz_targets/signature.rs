//! The Standard Webhooks signature: verifying any header never panics; our own
//! signature verifies, and it does not verify another id, time or body.
#![no_main]

use hookline_core::signing::EndpointSecret;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    id: &'a str,
    timestamp: i64,
    body: &'a [u8],
    header: &'a str,
}

fuzz_target!(|input: Input<'_>| {
    let secret = EndpointSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let Input {
        id,
        timestamp,
        body,
        header,
    } = input;
    let _ = secret.verify(id, timestamp, body, header);
    let signed = secret.sign(id, timestamp, body);
    assert!(secret.verify(id, timestamp, body, &signed));
    assert!(secret.verify(id, timestamp, body, &format!("{header} {signed}")));
    let mut other = body.to_vec();
    other.push(b'!');
    assert!(!secret.verify(id, timestamp, &other, &signed));
    assert!(!secret.verify(id, timestamp.wrapping_add(1), body, &signed));
    assert!(!secret.verify(&format!("{id}x"), timestamp, body, &signed));
});

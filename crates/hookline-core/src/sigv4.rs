//! AWS Signature Version 4: how a request to an AWS API (SQS, SNS) is
//! signed with an access key, as a pure function of the request and the time.
//!
//! Only what Hookline's requests need: a POST to `/` with no query string,
//! whose signed headers are `content-type`, `host`, `x-amz-date` and any
//! `x-amz-*` the caller adds. The unit test checks it against a signature
//! computed by botocore (AWS's own Python SDK) for the same request.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// An access key: its id and secret (an endpoint's `auth.basic`).
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
}

/// What is signed: a POST to `/` of `host`.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub host: &'a str,
    pub region: &'a str,
    /// The service's signing name (`sqs`, `sns`).
    pub service: &'a str,
    pub content_type: &'a str,
    /// More headers to sign, names lower-case (e.g. `x-amz-target`).
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// The headers to send: `x-amz-date` and `authorization`, for a request
/// made at `unix_seconds`.
pub fn sign(
    credentials: Credentials<'_>,
    request: Request<'_>,
    unix_seconds: i64,
) -> [(&'static str, String); 2] {
    let (date, amz_date) = timestamps(unix_seconds);
    let mut headers: Vec<(&str, &str)> = vec![
        ("content-type", request.content_type),
        ("host", request.host),
        ("x-amz-date", &amz_date),
    ];
    headers.extend_from_slice(request.headers);
    headers.sort_by_key(|(name, _)| *name);
    let signed: Vec<&str> = headers.iter().map(|(name, _)| *name).collect();
    let signed = signed.join(";");
    let mut canonical = String::from("POST\n/\n\n");
    for (name, value) in &headers {
        canonical.push_str(&format!("{name}:{}\n", value.trim()));
    }
    canonical.push_str(&format!(
        "\n{signed}\n{}",
        hex(&Sha256::digest(request.body))
    ));
    let scope = format!("{date}/{}/{}/aws4_request", request.region, request.service);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let key = [
        date.as_bytes(),
        request.region.as_bytes(),
        request.service.as_bytes(),
        b"aws4_request",
    ]
    .iter()
    .fold(
        format!("AWS4{}", credentials.secret_access_key).into_bytes(),
        |key, part| hmac(&key, part),
    );
    let signature = hex(&hmac(&key, to_sign.as_bytes()));
    [
        ("x-amz-date", amz_date.clone()),
        (
            "authorization",
            format!(
                "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
                credentials.access_key_id
            ),
        ),
    ]
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `YYYYMMDD` and `YYYYMMDDTHHMMSSZ` of a unix time (UTC).
fn timestamps(unix_seconds: i64) -> (String, String) {
    let days = unix_seconds.div_euclid(86_400);
    let seconds = unix_seconds.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let date = format!("{year:04}{month:02}{day:02}");
    let time = format!(
        "{:02}{:02}{:02}",
        seconds / 3600,
        seconds % 3600 / 60,
        seconds % 60
    );
    (date.clone(), format!("{date}T{time}Z"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same request signed by botocore (`SigV4Auth`, AWS's example key,
    /// 2015-08-30 12:36:00 UTC) gives this signature.
    #[test]
    fn signs_as_aws_sdks_do() {
        let [date, authorization] = sign(
            Credentials {
                access_key_id: "AKIDEXAMPLE",
                secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            },
            Request {
                host: "sqs.us-east-1.amazonaws.com",
                region: "us-east-1",
                service: "sqs",
                content_type: "application/x-amz-json-1.0",
                headers: &[("x-amz-target", "AmazonSQS.SendMessage")],
                body: br#"{"QueueUrl":"x"}"#,
            },
            1_440_938_160,
        );
        assert_eq!(date, ("x-amz-date", "20150830T123600Z".to_owned()));
        assert_eq!(
            authorization.1,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/sqs/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-target, \
             Signature=a218b58824866fb66d3c94e8f530a35e44fc1178a10a9c4cf6b7fdba686f3d07"
        );
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(
            timestamps(0),
            ("19700101".into(), "19700101T000000Z".into())
        );
        assert_eq!(
            timestamps(951_782_400),
            ("20000229".into(), "20000229T000000Z".into())
        );
        assert_eq!(
            timestamps(1_798_761_599),
            ("20261231".into(), "20261231T235959Z".into())
        );
    }
}

//! jq programs with jaq: compiled once, run on one input.
//!
//! This runs in the worker process only ([`crate::worker`]): nothing here is
//! bounded in time or memory, the process around it is.

use jaq_core::data::JustLut;
use jaq_core::load::{span, Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars};
use jaq_json::Val;

use crate::ProgramError;

pub(crate) type Filter = jaq_core::Filter<JustLut<Val>>;

/// Compiles `code` with jq's standard library (no modules, no files).
pub(crate) fn compile(code: &str) -> Result<Filter, ProgramError> {
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    // `env` would read the worker's environment (empty, but a program has
    // no business there either).
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, _, _)| *name != "env");
    let arena = Arena::default();
    let modules = Loader::new(defs)
        .load(&arena, File { code, path: () })
        .map_err(|errors| {
            use jaq_core::load::Error;
            let (_, error) = errors
                .into_iter()
                .next()
                .expect("an error when loading fails");
            match error {
                Error::Io(errors) => {
                    let (path, _) = errors.into_iter().next().expect("an error");
                    at(
                        code,
                        path,
                        format!("cannot import {path}: a transform is one program"),
                    )
                }
                Error::Lex(errors) => {
                    let (expected, found) = errors.into_iter().next().expect("an error");
                    let found =
                        &found[..found.char_indices().nth(1).map_or(found.len(), |(i, _)| i)];
                    at(code, found, format!("expected {}", expected.as_str()))
                }
                Error::Parse(errors) => {
                    let (expected, found) = errors.into_iter().next().expect("an error");
                    at(code, found, format!("expected {}", expected.as_str()))
                }
            }
        })?;
    Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errors| {
            let (_, errors) = errors
                .into_iter()
                .next()
                .expect("an error when compiling fails");
            let (name, undefined) = errors.into_iter().next().expect("an error");
            at(
                code,
                name,
                format!("undefined {} {name}", undefined.as_str()),
            )
        })
}

/// The error `message` about `part`, a slice of `code`, with its line and column.
fn at(code: &str, part: &str, message: String) -> ProgramError {
    let start = span(code, part).start;
    let before = &code[..start];
    let line = before.matches('\n').count() + 1;
    let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    ProgramError {
        message,
        line: Some(line as u32),
        column: Some(column as u32),
    }
}

/// The JSON texts of the first `most` values `filter` gives for `input`, each
/// at most `max_bytes`.
pub(crate) fn run(
    filter: &Filter,
    input: &str,
    most: usize,
    max_bytes: usize,
) -> Result<Vec<String>, ProgramError> {
    let input: Val = serde_json::from_str(input).map_err(|e| ProgramError::new(e.to_string()))?;
    let ctx = Ctx::<JustLut<Val>>::new(&filter.lut, Vars::new([]));
    let mut outputs = Vec::new();
    for output in filter.id.run((ctx, input)).take(most) {
        // (jaq's own `unwrap_valr` would exit the worker on `halt`.)
        let value = output.map_err(|exception| match exception.get_err() {
            Ok(error) => ProgramError::new(error.to_string()),
            Err(_) => {
                ProgramError::new("it called halt; a transform gives a value (or null to skip)")
            }
        })?;
        let text = value.to_string();
        if text.len() > max_bytes {
            return Err(ProgramError::new(format!(
                "it gave a value of more than {max_bytes} bytes"
            )));
        }
        // jq values that JSON has no spelling for (byte strings, NaN) are refused.
        if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
            return Err(ProgramError::new(format!(
                "it gave a value that is not JSON: {}",
                cut(&text, 80)
            )));
        }
        outputs.push(text);
    }
    Ok(outputs)
}

/// `text` cut to at most `most` bytes (on a character boundary), ending in
/// `…` when cut.
pub(crate) fn cut(text: &str, most: usize) -> String {
    if text.len() <= most {
        return text.to_owned();
    }
    let mut end = most;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outputs(code: &str, input: &str) -> Result<Vec<String>, ProgramError> {
        run(&compile(code)?, input, 2, 1 << 20)
    }

    #[test]
    fn a_program_reshapes_its_input() {
        assert_eq!(
            outputs(
                "{text: \"\\(.event_type): \\(.payload.id)\"}",
                r#"{"event_type":"order.paid","payload":{"id":42}}"#
            ),
            Ok(vec![r#"{"text":"order.paid: 42"}"#.to_owned()])
        );
        // The standard library is there (map, select, ascii_downcase, test).
        assert_eq!(
            outputs(
                "[.[] | select(test(\"^a\")) | ascii_upcase]",
                r#"["ab","b","ac"]"#
            ),
            Ok(vec![r#"["AB","AC"]"#.to_owned()])
        );
        assert_eq!(outputs("empty", "1"), Ok(vec![]));
        assert_eq!(
            outputs(".[]", "[1,2,3]"),
            Ok(vec!["1".to_owned(), "2".to_owned()])
        );
    }

    fn compile_error(code: &str) -> ProgramError {
        compile(code).err().expect("a compile error")
    }

    #[test]
    fn errors_say_where() {
        let error = compile_error("{a: .b\n| nope}");
        assert_eq!((error.line, error.column), (Some(2), Some(3)));
        assert_eq!(error.message, "undefined filter nope");

        let error = compile_error(".a | (");
        assert_eq!((error.line, error.column), (Some(1), Some(7)));
        assert!(error.message.starts_with("expected"), "{error}");

        let error = compile_error("import \"x\" as x; .");
        assert!(error.message.contains("cannot import"), "{error}");

        let error = outputs("error(\"no order\")", "{}").unwrap_err();
        assert!(error.message.contains("no order"), "{error}");
        assert_eq!(error.line, None);
    }

    #[test]
    fn outputs_stay_json_and_within_the_limit() {
        assert!(run(&compile("[range(100)]").unwrap(), "null", 1, 50).is_err());
        let error = outputs("\"a\" | tobytes", "null").unwrap_err();
        assert!(error.message.contains("not JSON"), "{error}");
        for halting in ["halt", "\"bye\" | halt_error"] {
            let error = outputs(halting, "null").unwrap_err();
            assert!(error.message.contains("halt"), "{halting}: {error}");
        }
        let error = compile_error("env");
        assert_eq!(error.message, "undefined filter env");
    }
}

//! The portal's translations (portal/js/i18n.js) are whole: every text its
//! code marks (`t`, `tx`, `tn`, `tc`, `msg`) has its entry in each language's table,
//! with the same `{name}`s, and no entry is left that nothing uses.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The languages besides English, by their table's file.
const TABLES: &[&str] = &["js/locales/he.js"];

/// A text the code marks, where, and whether it is a count's (`tn`'s plural form).
#[derive(Debug)]
struct Marked {
    text: String,
    file: &'static str,
    count: bool,
}

#[test]
fn every_marked_text_is_translated_and_every_translation_is_used() {
    let marked = marked_texts();
    assert!(
        marked.len() > 300,
        "found only {} marked texts",
        marked.len()
    );
    for table_path in TABLES {
        let table = table(table_path);
        let mut problems = Vec::new();
        for m in &marked {
            match table.get(&m.text) {
                None => problems.push(format!("{}: no entry for {:?}", m.file, m.text)),
                Some(Value::String(translated)) if !m.count => {
                    if names(translated) != names(&m.text) {
                        problems.push(format!("{:?}: its names differ in {translated:?}", m.text));
                    }
                }
                Some(Value::Object(forms)) if m.count => {
                    for form in ["one", "two", "other"] {
                        let Some(Value::String(translated)) = forms.get(form) else {
                            problems.push(format!("{:?}: no {form:?} form", m.text));
                            continue;
                        };
                        // `one` and `two` may say the number in words.
                        let mut expected = names(&m.text);
                        if form != "other" {
                            expected.remove("n");
                        }
                        let mut got = names(translated);
                        if form != "other" {
                            got.remove("n");
                        }
                        if got != expected {
                            problems.push(format!("{:?}: its {form} form's names differ", m.text));
                        }
                    }
                }
                Some(other) => problems.push(format!(
                    "{:?}: a {} entry, for a {}",
                    m.text,
                    if other.is_object() { "count's" } else { "text" },
                    if m.count { "count" } else { "text" }
                )),
            }
        }
        let used: BTreeSet<&str> = marked.iter().map(|m| m.text.as_str()).collect();
        for key in table.keys() {
            if !used.contains(key.as_str()) {
                problems.push(format!("{table_path}: {key:?} is used nowhere"));
            }
        }
        assert!(
            problems.is_empty(),
            "{table_path}:\n{}",
            problems.join("\n")
        );
    }
}

#[test]
fn the_scanner_reads_what_the_code_marks() {
    let found = scan(
        "x.js",
        r#"
        // t('not this: a comment')
        /* t('nor this') */
        const A = { a: msg('Pending'), b: msg("It's") };
        h('p', {}, t('Checked at {time}.', { time }), tx(' since {time}', { time: el }));
        label(tn(n, '{n} failure', '{n} failures'), tc('count', 'Failed'));
        const s = 'say t(\'inside a string\')';
        const u = `${t('In a template')}: ${x ? { a: tn(k, 'one', 'many') } : ''} t('not this')`;
        at(x); format(y); t(TITLES[kind]);
        "#,
    );
    let texts: Vec<(&str, bool)> = found.iter().map(|m| (m.text.as_str(), m.count)).collect();
    assert_eq!(
        texts,
        [
            ("Pending", false),
            ("It's", false),
            ("Checked at {time}.", false),
            (" since {time}", false),
            ("{n} failures", true),
            ("count|Failed", false),
            ("In a template", false),
            ("many", true),
        ]
    );
}

/// Every marked text of the portal's scripts (not i18n.js, which defines them,
/// nor the tables).
fn marked_texts() -> Vec<Marked> {
    super::FILES
        .iter()
        .filter(|(path, _)| {
            path.ends_with(".js") && *path != "js/i18n.js" && !path.starts_with("js/locales/")
        })
        .flat_map(|(path, bytes)| scan(path, std::str::from_utf8(bytes).unwrap()))
        .collect()
}

/// A table: the JSON after `export default`, to its last `}`.
fn table(path: &str) -> BTreeMap<String, Value> {
    let (_, bytes) = super::FILES
        .iter()
        .find(|(p, _)| *p == path)
        .unwrap_or_else(|| panic!("{path} is not served"));
    let text = std::str::from_utf8(bytes).unwrap();
    let start = text.find("export default ").expect("export default") + "export default ".len();
    let json = &text[start..=text.rfind('}').unwrap()];
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// The `{name}`s in a text.
fn names(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end)
                if end > 0
                    && after[..end]
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_') =>
            {
                found.insert(after[..end].to_owned());
                rest = &after[end + 1..];
            }
            _ => rest = after,
        }
    }
    found
}

/// The string literals given to `t(`, `tx(`, `msg(` and `tn(` (its plural
/// form, which keys a count), outside comments and strings, and inside
/// template literals' `${…}`. A template literal there is refused: it cannot
/// be a key.
fn scan(file: &'static str, source: &str) -> Vec<Marked> {
    let chars: Vec<char> = source.chars().collect();
    let mut found = Vec::new();
    code(&chars, 0, false, file, &mut found);
    found
}

/// Scans code from `i` to the end, or (`inside`) to the `}` that closes a
/// template literal's `${`; returns the index after where it stopped.
fn code(
    chars: &[char],
    mut i: usize,
    inside: bool,
    file: &'static str,
    found: &mut Vec<Marked>,
) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        match chars[i] {
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            '{' => {
                depth += 1;
                i += 1;
            }
            '}' if depth == 0 && inside => return i + 1,
            '}' => {
                depth -= 1;
                i += 1;
            }
            '`' => i = template(chars, i, file, found),
            quote @ ('\'' | '"') => i = literal(chars, i, quote).1,
            c if c.is_ascii_alphabetic() && (i == 0 || !is_word(chars[i - 1])) => {
                let start = i;
                while i < chars.len() && is_word(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if matches!(word.as_str(), "t" | "tx" | "tn" | "tc" | "msg")
                    && chars.get(i) == Some(&'(')
                {
                    i = marked(chars, i + 1, &word, file, found);
                }
            }
            _ => i += 1,
        }
    }
    i
}

/// After `word(`: takes its key, if it is a literal; returns where to go on.
fn marked(
    chars: &[char],
    mut i: usize,
    word: &str,
    file: &'static str,
    found: &mut Vec<Marked>,
) -> usize {
    if word == "tc" {
        // The context, then the text: `context|text` keys it.
        let ([context, text], end) = two_literals(chars, i, file, word);
        found.push(Marked {
            text: format!("{context}|{text}"),
            file,
            count: false,
        });
        return end;
    }
    if word == "tn" {
        // The count, then the one and the other form: the other keys it.
        while i < chars.len() && !matches!(chars[i], '\'' | '"' | '`' | ')') {
            i += 1;
        }
        let ([_one, other], end) = two_literals(chars, i, file, word);
        found.push(Marked {
            text: other,
            file,
            count: true,
        });
        return end;
    }
    i = skip_space(chars, i);
    match chars.get(i) {
        Some('`') => panic!("{file}: {word}(` — a template literal cannot be a key"),
        Some(&quote @ ('\'' | '"')) => {
            let (text, end) = literal(chars, i, quote);
            found.push(Marked {
                text,
                file,
                count: false,
            });
            end
        }
        // A text looked up in a table of `msg`s.
        _ => i,
    }
}

/// The two string literals (separated by a comma) from `i`, and where to go on.
fn two_literals(chars: &[char], mut i: usize, file: &str, word: &str) -> ([String; 2], usize) {
    let mut two = [String::new(), String::new()];
    for text in &mut two {
        i = skip_space(chars, i);
        assert!(
            matches!(chars.get(i), Some('\'' | '"')),
            "{file}: {word}( without its two string literals"
        );
        let (literal, end) = literal(chars, i, chars[i]);
        *text = literal;
        i = skip_space(chars, end);
        if chars.get(i) == Some(&',') {
            i += 1;
        }
    }
    (two, i)
}

/// Skips the template literal opening at `start`, scanning its `${…}`s as code.
fn template(chars: &[char], start: usize, file: &'static str, found: &mut Vec<Marked>) -> usize {
    let mut i = start + 1;
    while i < chars.len() && chars[i] != '`' {
        if chars[i] == '\\' {
            i += 2;
        } else if chars[i] == '$' && chars.get(i + 1) == Some(&'{') {
            i = code(chars, i + 2, true, file, found);
        } else {
            i += 1;
        }
    }
    i + 1
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.'
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The string literal opening at `start` (its text, unescaped) and the index after it.
fn literal(chars: &[char], start: usize, quote: char) -> (String, usize) {
    let mut text = String::new();
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' {
            i += 1;
            match chars.get(i) {
                Some('n') => text.push('\n'),
                Some('u') => {
                    let hex: String = chars[i + 1..i + 5].iter().collect();
                    text.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                    i += 4;
                }
                Some(&c) => text.push(c),
                None => break,
            }
        } else {
            text.push(chars[i]);
        }
        i += 1;
    }
    (text, i + 1)
}

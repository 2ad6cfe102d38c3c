//! `--set FIELD=VALUE`: one field of a scenario file changed on the command line, so a user can
//! try a poll setting, turn a fault off or run a regression seed as it was found without editing
//! (or copying) the file. The field is any path of [`super::fields::FIELDS`], concrete
//! (`workload.tools[0].weight`, `faults.rates.poll_503`); the value is TOML (`500`, `0.25`,
//! `true`, `"text"`, `[1000, 2000]`), and a bare word is read as text for a text field. The file
//! is checked alone first, so its own errors keep their line numbers; the settings are then
//! applied in order and the result is validated like a file, its errors naming the settings.

use super::fields::{field_of, Unit};
use super::{Scenario, ScenarioError};

/// Most settings one command takes (a limit on the loop that applies them).
pub const MAX_SETTINGS: usize = 64;

/// One `FIELD=VALUE`, checked against the field table.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// The concrete dotted path as given.
    pub field: String,
    pub value: toml::Value,
}

impl Setting {
    /// Reads `FIELD=VALUE`; the error says which part is wrong and why.
    pub fn parse(arg: &str) -> Result<Setting, String> {
        let Some((field, raw)) = arg.split_once('=') else {
            return Err(format!("--set {arg}: expected FIELD=VALUE"));
        };
        let field = field.trim();
        let raw = raw.trim();
        let Some(row) = field_of(field) else {
            return Err(format!(
                "--set {arg}: `{field}` is not a scenario field (docs/scenario-reference.md lists them)"
            ));
        };
        if let Some(why) = row.never {
            return Err(format!(
                "--set {arg}: `{field}` is never set in a scenario: {why}"
            ));
        }
        if field.contains("[]") || field.split('.').any(str::is_empty) {
            return Err(format!(
                "--set {arg}: `{field}` needs every part named and every list index given, e.g. workload.tools[0].weight"
            ));
        }
        let value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
            Ok(mut t) => t.remove("v").expect("the table holds the key just parsed"),
            Err(_) if is_text(row.unit) && !raw.is_empty() => toml::Value::String(raw.into()),
            Err(_) => {
                return Err(format!(
                    "--set {arg}: `{raw}` is not a TOML value (a number, true/false, \"text\" or [a, b])"
                ))
            }
        };
        check_kind(row.unit, row.pair, &value)
            .map_err(|want| format!("--set {arg}: `{field}` takes {want}"))?;
        Ok(Setting {
            field: field.into(),
            value,
        })
    }

    /// `FIELD=VALUE` as it is given back in commands, one shell word (quoted when it must be).
    pub fn shell_word(&self) -> String {
        let word = self.to_string();
        // shlex quotes `=` too; a word of only these characters means the same to every shell.
        let plain = |c: char| c.is_ascii_alphanumeric() || "._=,:/+-".contains(c);
        if word.chars().all(plain) {
            return word;
        }
        match shlex::try_quote(&word) {
            Ok(q) => q.into_owned(),
            // Only a NUL byte is refused, and a TOML value cannot hold one unescaped.
            Err(_) => word,
        }
    }
}

/// `FIELD=VALUE` unquoted, as a schedule file stores it ([`Setting::parse`] reads it back).
impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.field, self.value)
    }
}

/// The `--set` flag of every command that runs series from a scenario file.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SetArgs {
    /// Change one field of every scenario for this run, e.g.
    /// --set executor.core.poll.initial_interval_ms=250 --set faults.rates.poll_503=0
    /// (repeatable, applied in order; any field of docs/scenario-reference.md; the value is
    /// TOML, a bare word is text). Replay commands repeat the settings.
    #[arg(long = "set", value_name = "FIELD=VALUE", value_parser = Setting::parse)]
    pub sets: Vec<Setting>,
}

impl SetArgs {
    /// The settings, or why there are too many.
    pub fn checked(&self) -> Result<&[Setting], String> {
        if self.sets.len() > MAX_SETTINGS {
            return Err(format!(
                "--set given {} times; at most {MAX_SETTINGS} settings",
                self.sets.len()
            ));
        }
        Ok(&self.sets)
    }
}

/// ` --set A=1 --set B=2`: the settings as flags to append to a command (empty for none).
pub fn flags(sets: &[Setting]) -> String {
    sets.iter()
        .map(|s| format!(" --set {}", s.shell_word()))
        .collect()
}

fn is_text(unit: Unit) -> bool {
    matches!(unit, Unit::Text | Unit::Choice(_))
}

/// Whether `value` has the shape the field's unit reads (bounds are the validator's).
fn check_kind(unit: Unit, pair: bool, value: &toml::Value) -> Result<(), String> {
    let number = |v: &toml::Value| v.is_integer() || v.is_float();
    let ok = match unit {
        _ if pair => value
            .as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(number)),
        u if u.is_number() => number(value),
        Unit::Flag => value.is_bool(),
        Unit::Text | Unit::Choice(_) => value.is_str(),
        Unit::ChoiceList(_) | Unit::ToolList => value
            .as_array()
            .is_some_and(|a| a.iter().all(toml::Value::is_str)),
        _ => unreachable!("every unit is matched above"),
    };
    if ok {
        return Ok(());
    }
    Err(match unit {
        _ if pair => "a pair of numbers, e.g. [1000, 2000]".into(),
        u if u.is_number() => format!("a number ({})", u.describe()),
        Unit::Flag => "true or false".into(),
        u => u.describe(),
    })
}

/// Loads `file` and applies `sets` in order. With no settings this is [`Scenario::load`].
pub fn load(file: &std::path::Path, sets: &[Setting]) -> Result<Scenario, ScenarioError> {
    let (name, text) = Scenario::read(file)?;
    if sets.is_empty() {
        return Scenario::parse(&name, &text);
    }
    apply(&name, &text, sets)
}

/// The scenario of `text` (from `file`) with `sets` applied; errors name the file and the
/// settings, since the text the validator reads is no longer the file's.
pub fn apply(file: &str, text: &str, sets: &[Setting]) -> Result<Scenario, ScenarioError> {
    assert!(
        sets.len() <= MAX_SETTINGS,
        "the command line refuses more than {MAX_SETTINGS} settings"
    );
    // The file alone first: its errors keep their own lines.
    Scenario::parse(file, text)?;
    let with = format!("{file} with{}", flags(sets));
    let err = |field: &str, problem: String| ScenarioError {
        file: with.clone(),
        field: field.into(),
        problem,
    };
    let mut doc: toml::Table =
        toml::from_str(text).map_err(|e| err("(document)", e.to_string()))?;
    for s in sets {
        set(&mut doc, &s.field, s.value.clone()).map_err(|p| err(&s.field, p))?;
    }
    let edited = toml::to_string(&doc).map_err(|e| err("(document)", e.to_string()))?;
    Scenario::parse(&with, &edited)
}

/// Sets the value at a concrete dotted path, creating missing tables; a list element must exist.
fn set(doc: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    let (last, walk) = parts.split_last().expect("split yields at least one part");
    let mut table = doc;
    for part in walk {
        let (key, index) = split_index(part)?;
        let entry = table
            .entry(key.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()));
        let slot = match index {
            None => entry,
            Some(i) => {
                let list = entry
                    .as_array_mut()
                    .ok_or_else(|| format!("`{key}` is not a list in the file"))?;
                let n = list.len();
                list.get_mut(i)
                    .ok_or_else(|| format!("`{key}` has {n} element(s), so [{i}] does not exist"))?
            }
        };
        table = slot
            .as_table_mut()
            .ok_or_else(|| format!("`{part}` is not a table in the file"))?;
    }
    let (key, index) = split_index(last)?;
    assert!(
        index.is_none(),
        "the field table has no field that is a list element"
    );
    table.insert(key.to_string(), value);
    Ok(())
}

/// `tools[2]` -> (`tools`, Some(2)); `poll` -> (`poll`, None).
fn split_index(part: &str) -> Result<(&str, Option<usize>), String> {
    let Some((key, rest)) = part.split_once('[') else {
        return Ok((part, None));
    };
    let index = rest
        .strip_suffix(']')
        .and_then(|i| i.parse::<usize>().ok())
        .ok_or_else(|| format!("`{part}`: a list index is a whole number in brackets"))?;
    Ok((key, Some(index)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smoke() -> (String, String) {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/smoke.toml");
        (file.into(), std::fs::read_to_string(file).unwrap())
    }

    fn sets(args: &[&str]) -> Vec<Setting> {
        args.iter().map(|a| Setting::parse(a).unwrap()).collect()
    }

    #[test]
    fn a_setting_changes_that_field_and_nothing_else() {
        let (file, text) = smoke();
        let base = Scenario::parse(&file, &text).unwrap();
        let got = apply(
            &file,
            &text,
            &sets(&[
                "executor.core.poll.initial_interval_ms=777",
                "faults.rates.poll_503=0.25",
                "workload.tools[0].weight=9",
            ]),
        )
        .unwrap();
        assert_eq!(got.executor.core.poll.initial_interval_ms, 777);
        assert_eq!(got.faults.rates.get("poll_503").copied(), Some(0.25));
        assert_eq!(got.workload.tools[0].weight, 9);
        let mut back = got.clone();
        back.executor.core.poll.initial_interval_ms = base.executor.core.poll.initial_interval_ms;
        back.faults.rates = base.faults.rates.clone();
        back.workload.tools[0].weight = base.workload.tools[0].weight;
        assert_eq!(back, base, "only the three fields set may differ");
    }

    #[test]
    fn the_later_of_two_settings_of_one_field_wins() {
        let (file, text) = smoke();
        let got = apply(
            &file,
            &text,
            &sets(&["executor.max_qps=7", "executor.max_qps=9"]),
        );
        assert_eq!(got.unwrap().executor.max_qps, 9);
    }

    #[test]
    fn a_bare_word_is_text_only_for_a_text_field() {
        assert_eq!(
            Setting::parse("name=other").unwrap().value,
            toml::Value::String("other".into())
        );
        let e = Setting::parse("executor.max_qps=fast").unwrap_err();
        assert!(e.contains("not a TOML value"), "{e}");
    }

    #[test]
    fn bad_settings_name_the_setting_and_what_is_wrong() {
        for (arg, want) in [
            ("executor.max_qps", "expected FIELD=VALUE"),
            (
                "executor.max_qpz=3",
                "`executor.max_qpz` is not a scenario field",
            ),
            ("executor.core.mutation=\"x\"", "never set in a scenario"),
            ("workload.tools[].weight=3", "every list index given"),
            ("executor.max_qps=true", "takes a number"),
            ("workload.tools[0].duration_ms=5", "a pair of numbers"),
            ("gates.coverage=1", "true or false"),
        ] {
            let e = Setting::parse(arg).unwrap_err();
            assert!(e.starts_with(&format!("--set {arg}: ")), "{e}");
            assert!(e.contains(want), "{arg}: {e}");
        }
    }

    #[test]
    fn a_value_the_validator_refuses_names_the_file_the_settings_and_the_field() {
        let (file, text) = smoke();
        let e = apply(&file, &text, &sets(&["faults.rates.poll_503=1.5"])).unwrap_err();
        assert_eq!(
            e.file,
            format!("{file} with --set faults.rates.poll_503=1.5")
        );
        assert_eq!(e.field, "faults.rates.poll_503");
        let e = apply(&file, &text, &sets(&["workload.tools[40].weight=2"])).unwrap_err();
        assert_eq!(e.field, "workload.tools[40].weight");
        assert!(
            e.problem.contains("so [40] does not exist"),
            "{}",
            e.problem
        );
    }

    #[test]
    fn the_file_is_judged_alone_first() {
        let (file, text) = smoke();
        let broken = format!("{text}\nunknown_key = 1\n");
        let e = apply(&file, &broken, &sets(&["executor.max_qps=9"])).unwrap_err();
        assert_eq!(e.file, file, "the file's own error is the file's");
    }

    #[test]
    fn a_setting_is_given_back_as_one_shell_word() {
        let s = Setting::parse("workload.tools[0].duration_ms=[1000, 2000]").unwrap();
        assert_eq!(
            s.shell_word(),
            "'workload.tools[0].duration_ms=[1000, 2000]'"
        );
        let s = Setting::parse("executor.max_qps=9").unwrap();
        assert_eq!(flags(&[s]), " --set executor.max_qps=9");
        let s = Setting::parse("name=other").unwrap();
        assert_eq!(
            Setting::parse(&shlex::split(&s.shell_word()).unwrap()[0]).unwrap(),
            s
        );
    }
}

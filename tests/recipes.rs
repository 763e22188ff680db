//! The guide's recipes (`examples/rules/recipes/*.toml`, the chapter "Recipes against fraud and
//! abuse") load as `check_rules` loads a file, list the rules they say, and are Chirp's own rules
//! word for word: a recipe cannot drift from the rule file the simulator judges.

#[allow(dead_code, reason = "the example's own main is not run here")]
#[path = "../examples/check_rules.rs"]
mod check_rules;

/// Each recipe, and the rules (and `[[limit]]`s) it must list.
const RECIPES: [(&str, &str, &[&str]); 3] = [
    (
        "one-time-codes.toml",
        include_str!("../examples/rules/recipes/one-time-codes.toml"),
        &[
            "sms-per-address",
            "sms-per-ip-block",
            "otp-global",
            "sms-per-phone (limit)",
            "sms-per-range (limit)",
            "sms-per-requester (limit)",
        ],
    ),
    (
        "sign-up-wave.toml",
        include_str!("../examples/rules/recipes/sign-up-wave.toml"),
        &["signups-per-device", "signups-per-ip-block"],
    ),
    (
        "credential-stuffing.toml",
        include_str!("../examples/rules/recipes/credential-stuffing.toml"),
        &["login-attempts-per-account (limit)"],
    ),
];

const CHIRP: &str = include_str!("../examples/rules/chirp.toml");

/// The `[[rule]]` and `[[limit]]` tables of a file, each from its header to the next blank
/// line (comments between tables left out).
fn tables(text: &str) -> Vec<String> {
    let mut tables = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with("[[") {
            current = Some(String::new());
        }
        if line.trim().is_empty() || line.starts_with('#') {
            tables.extend(current.take());
            continue;
        }
        if let Some(table) = &mut current {
            table.push_str(line);
            table.push('\n');
        }
    }
    tables.extend(current);
    tables
}

#[test]
fn every_recipe_loads_as_check_rules_loads_it_and_lists_its_rules() {
    for (name, text, expected) in RECIPES {
        let listing = check_rules::check(name, text).unwrap_or_else(|mistakes| {
            panic!("{name} does not load:\n{mistakes}");
        });
        let listed: Vec<&str> = listing
            .lines()
            .skip(1)
            .filter_map(|line| line.split("  ").next())
            .map(str::trim)
            .collect();
        assert_eq!(listed, expected, "{name}:\n{listing}");
    }
}

#[test]
fn every_recipe_is_chirps_own_rules_word_for_word() {
    let chirp = tables(CHIRP);
    for (name, text, _) in RECIPES {
        let recipe = tables(text);
        assert!(!recipe.is_empty(), "{name} holds tables");
        for table in recipe {
            assert!(
                chirp.contains(&table),
                "{name}: this table is not in examples/rules/chirp.toml as written:\n{table}"
            );
        }
    }
}

#[test]
fn check_rules_reports_a_broken_recipe_at_its_line() {
    let (name, text, _) = RECIPES[0];
    let broken = text.replacen("limit = 5\n", "limit = five\n", 1);
    let mistakes = check_rules::check(name, &broken).expect_err("a broken file");
    assert!(mistakes.contains("one-time-codes.toml:"), "{mistakes}");
    assert!(mistakes.contains("would not be loaded"), "{mistakes}");
}

//! The matchers' unit tests, through [`matches`] as a minion calls it.

use super::*;
use regex::Regex;
use serde_json::json;

fn grains() -> Map<String, Value> {
    let v = json!({
        "id": "web-dc1-srv1",
        "os": "Debian",
        "os_family": "Debian",
        "kernel": "Linux",
        "num_cpus": 4,
        "mem_ratio": 0.5,
        "big": 1e16,
        "virtual": false,
        "ipv4": ["127.0.0.1", "10.0.0.5"],
        "roles": ["web", "db"],
        "master": "salt.example.com:4506",
        "nothing": null,
        "empty": {},
        "deep": {"a": {"b": "leaf"}, "a:b": "colon-key"},
        "pkgs": {"nginx": "1.24", "openssl": "3.0"},
        "disks": [{"name": "sda", "size": 100}, {"name": "sdb"}],
        "nested": {"x": {"y": "value:with:colons"}},
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn m(tgt: Value, t: TargetType, id: &str) -> Result<bool, TargetError> {
    matches(&tgt, t, id, &grains())
}

fn glob(p: &str, id: &str) -> bool {
    m(json!(p), TargetType::Glob, id).unwrap()
}

fn pcre(p: &str, id: &str) -> bool {
    m(json!(p), TargetType::Pcre, id).unwrap()
}

fn grain(p: &str) -> bool {
    m(json!(p), TargetType::Grain, "any").unwrap()
}

fn comp(expr: &str, id: &str) -> bool {
    m(json!(expr), TargetType::Compound, id).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn comp_err(expr: &str) -> TargetError {
    match m(json!(expr), TargetType::Compound, "web1") {
        Err(e) => e,
        Ok(v) => panic!("{expr:?} should be an error, got {v}"),
    }
}

fn assert_bad_compound(expr: &str, needle: &str) {
    match comp_err(expr) {
        TargetError::BadCompound { reason, .. } => {
            assert!(
                reason.contains(needle),
                "{expr:?}: {reason:?} lacks {needle:?}"
            )
        }
        other => panic!("{expr:?}: expected BadCompound, got {other:?}"),
    }
}

#[test]
fn listed_ids_are_those_a_master_awaits() {
    assert_eq!(listed_ids(&json!("a,,b"), "list"), ["a", "b"]);
    assert_eq!(listed_ids(&json!(["a", "b"]), "list"), ["a", "b"]);
    assert_eq!(
        listed_ids(&json!("L@a,b and not L@c or ( L@d )"), "compound"),
        ["a", "b", "d"]
    );
    assert_eq!(listed_ids(&json!(["L@x", "or", "y*"]), "compound"), ["x"]);
    assert!(listed_ids(&json!("a,b"), "glob").is_empty());
}

#[test]
fn parses_target_types() {
    assert_eq!(TargetType::parse("glob"), Ok(TargetType::Glob));
    assert_eq!(TargetType::parse("list"), Ok(TargetType::List));
    assert_eq!(TargetType::parse("pcre"), Ok(TargetType::Pcre));
    assert_eq!(TargetType::parse("grain"), Ok(TargetType::Grain));
    assert_eq!(TargetType::parse("compound"), Ok(TargetType::Compound));
    assert_eq!(TargetType::parse("grain_pcre"), Ok(TargetType::GrainPcre));
    assert_eq!(TargetType::parse("ipcidr"), Ok(TargetType::Ipcidr));
    assert_eq!(TargetType::parse("pillar"), Ok(TargetType::Pillar));
    assert_eq!(TargetType::parse("pillar_pcre"), Ok(TargetType::PillarPcre));
    for bad in ["", "Glob", "pillar_exact", "nodegroup", " glob"] {
        assert_eq!(
            TargetType::parse(bad),
            Err(TargetError::UnknownType(bad.to_string()))
        );
    }
    let msg = TargetType::parse("range").unwrap_err().to_string();
    assert!(msg.contains("`range`") && msg.contains("compound"), "{msg}");
}

#[test]
fn star_patterns_agree_with_fnmatch_translate() {
    let patterns = [
        "", "*", "**", "web*", "*1", "w*b*1", "*eb*", "web1", "a*a", "*a*a*", "a**b",
    ];
    let ids = [
        "", "web1", "web", "aweb1", "wbweb1", "a", "aa", "aba", "ab", "a\nb",
    ];
    for p in patterns {
        let re = Regex::new(&fnmatch_translate(p).unwrap()).unwrap();
        let fast = Glob::new(p).unwrap();
        assert!(matches!(fast, Glob::Stars(_)), "{p}");
        for id in ids {
            assert_eq!(
                fast.is_match(id),
                re.is_match(id),
                "pattern {p:?} on {id:?}"
            );
        }
    }
}

#[test]
fn glob_basics() {
    assert!(glob("*", "web1"));
    assert!(glob("web*", "web1"));
    assert!(glob("web*", "web"));
    assert!(!glob("web*", "aweb1"));
    assert!(glob("web?", "web1"));
    assert!(!glob("web?", "web12"));
    assert!(!glob("web?", "web"));
    assert!(glob("web[123]", "web2"));
    assert!(!glob("web[123]", "web4"));
    assert!(glob("web[!123]", "web4"));
    assert!(!glob("web[!123]", "web1"));
    assert!(glob("web[1-3]", "web2"));
    assert!(!glob("web[1-3]", "web5"));
    // Whole-string match, case-sensitive.
    assert!(!glob("web", "web1"));
    assert!(!glob("Web*", "web1"));
    assert!(!glob("", "web1"));
    // `*` crosses `.` and `/`.
    assert!(glob("*.example.com", "web1.dc1.example.com"));
    assert!(glob("a*z", "a/b/c.z"));
    assert!(glob("*", ""));
    assert!(glob("**", "x"));
}

#[test]
fn glob_python_fnmatch_corners() {
    // An unclosed `[` is a literal.
    assert!(glob("web[1", "web[1"));
    assert!(!glob("web[1", "web1"));
    // `]` first in a set is a member.
    assert!(glob("[]]", "]"));
    assert!(glob("[!]]", "a"));
    assert!(!glob("[!]]", "]"));
    // A trailing `-` is literal.
    assert!(glob("[a-]", "-"));
    assert!(glob("[a-]", "a"));
    // Reversed ranges are empty: never match.
    assert!(!glob("[z-a]", "m"));
    assert!(!glob("x[z-a]", "x-"));
    // `[!z-a]`: negated empty set, any character.
    assert!(glob("[!z-a]", "q"));
    // `^` is not negation in fnmatch.
    assert!(glob("[^a]", "^"));
    assert!(glob("[^a]", "a"));
    assert!(!glob("[^a]", "b"));
    // No escaping, no braces; regex metacharacters are literal.
    assert!(glob(r"a\b", r"a\b"));
    assert!(glob("{a,b}", "{a,b}"));
    assert!(!glob("{a,b}", "a"));
    assert!(glob("a.b+c", "a.b+c"));
    assert!(!glob("a.b", "axb"));
    assert!(glob("[a-c-e]", "-"));
    assert!(glob("[a-c-e]", "e"));
    assert!(!glob("[a-c-e]", "d"));
    assert!(glob("[&|~]", "|"));
    // Non-ASCII.
    assert!(glob("sérv?r", "sérvër"));
}

#[test]
fn list_target() {
    let l = TargetType::List;
    assert!(m(json!("web1,web2"), l, "web2").unwrap());
    assert!(m(json!("web1"), l, "web1").unwrap());
    // Nothing is trimmed, as in Salt.
    assert!(!m(json!(" web1 , web2 "), l, "web1").unwrap());
    assert!(m(json!("web1, web2"), l, "web1").unwrap());
    assert!(!m(json!("web1, web2"), l, "web2").unwrap());
    assert!(m(json!("a,web1,b"), l, "web1").unwrap());
    assert!(!m(json!("web1,web2"), l, "web").unwrap());
    // The whole list equal to the id counts, as in Salt.
    assert!(m(json!("web1,web2"), l, "web1,web2").unwrap());
    assert!(!m(json!("web*"), l, "web1").unwrap());
    assert!(m(json!(["web1", "db1"]), l, "db1").unwrap());
    assert!(!m(json!(["web1", "db1"]), l, "db").unwrap());
    assert!(!m(json!([]), l, "db").unwrap());
    assert_eq!(
        m(json!(["web1", 2]), l, "web1"),
        Err(TargetError::WrongTgtType {
            tgt_type: "list",
            expected: "a string or an array of strings",
            found: "a number",
        })
    );
    assert!(matches!(
        m(json!({"a": 1}), l, "web1"),
        Err(TargetError::WrongTgtType {
            found: "an object",
            ..
        })
    ));
}

#[test]
fn wrong_json_types() {
    for t in [TargetType::Glob, TargetType::Pcre, TargetType::Grain] {
        let err = m(json!(["web1"]), t, "web1").unwrap_err();
        assert!(matches!(
            err,
            TargetError::WrongTgtType {
                found: "an array",
                ..
            }
        ));
        assert!(m(json!(null), t, "web1").is_err());
    }
    let err = m(json!(5), TargetType::Compound, "web1").unwrap_err();
    assert_eq!(
        err.to_string(),
        "a compound target must be a string or an array of strings, not a number"
    );
}

#[test]
fn pcre_is_anchored_at_start_only() {
    assert!(pcre("web", "web1"));
    assert!(pcre(r"^web\d+$", "web12"));
    assert!(!pcre(r"^web\d+$", "web12x"));
    assert!(!pcre("eb", "web1"));
    assert!(!pcre("1", "web1"));
    assert!(pcre(".*1", "web1"));
    assert!(pcre("web|db", "db7"));
    assert!(!pcre("Web", "web1"));
    assert!(pcre("(?i)Web", "web1"));
    assert!(pcre("", "web1"));
    assert!(pcre("web-dc1-srv.*", "web-dc1-srv3"));
}

#[test]
fn pcre_errors() {
    for bad in ["(", "a)|(b", "[a-", "*web"] {
        match m(json!(bad), TargetType::Pcre, "web1") {
            Err(TargetError::BadRegex { pattern, .. }) => assert_eq!(pattern, bad),
            other => panic!("{bad}: {other:?}"),
        }
    }
    // Python's lookaround and backreferences work.
    assert!(pcre("web(?=1)", "web1"));
    assert!(pcre(r"(\w)e\1", "wew"));
}

#[test]
fn grain_simple() {
    assert!(grain("os:Debian"));
    // Salt lowercases both sides.
    assert!(grain("os:debian"));
    assert!(grain("os:DEBIAN"));
    assert!(grain("os:Deb*"));
    assert!(grain("os:*"));
    assert!(!grain("os:Ubuntu"));
    assert!(!grain("os:Deb"));
    assert!(grain("kernel:L?nux"));
    // Missing grains never match, not even `*`.
    assert!(!grain("missing:*"));
    assert!(!grain("missing:"));
    // No delimiter at all: no match.
    assert!(!grain("os"));
    assert!(!grain(""));
}

/// `salt --delimiter`: grain and grain_pcre split key paths at it; the
/// other types never read it; an empty one is a malformed job.
#[test]
fn grain_targets_take_the_jobs_delimiter() {
    let at = |tgt: &str, t: TargetType, delim: Option<&str>| {
        matches_delimited(&json!(tgt), t, "web-dc1-srv1", &grains(), delim)
    };
    assert_eq!(at("deep;a;b;leaf", TargetType::Grain, Some(";")), Ok(true));
    assert_eq!(
        at("deep;a:b;colon-*", TargetType::Grain, Some(";")),
        Ok(true)
    );
    assert_eq!(at("master;*:4506", TargetType::Grain, Some(";")), Ok(true));
    assert_eq!(
        at("nested|x|y|value:with:*", TargetType::Grain, Some("|")),
        Ok(true)
    );
    assert_eq!(at("os;Deb.*", TargetType::GrainPcre, Some(";")), Ok(true));
    // `:` is then part of a key or a value like any other character.
    assert_eq!(at("os:Debian", TargetType::Grain, Some(";")), Ok(false));
    assert_eq!(
        at("deep:a:b:leaf", TargetType::Grain, Some("::")),
        Ok(false)
    );
    assert_eq!(
        at("deep::a::b::leaf", TargetType::Grain, Some("::")),
        Ok(true)
    );
    assert_eq!(at("web*", TargetType::Glob, Some(";")), Ok(true));
    assert_eq!(at("G@os:Debian", TargetType::Compound, Some(";")), Ok(true));
    assert_eq!(at("os:Debian", TargetType::Grain, None), Ok(true));
    assert_eq!(
        at("os;Debian", TargetType::Grain, Some("")),
        Err(TargetError::EmptyDelimiter)
    );
    assert_eq!(
        at("os;Debian", TargetType::GrainPcre, Some("")),
        Err(TargetError::EmptyDelimiter)
    );
    assert_eq!(at("web*", TargetType::Glob, Some("")), Ok(true));
}

#[test]
fn grain_non_string_values() {
    assert!(grain("num_cpus:4"));
    assert!(grain("num_cpus:[3-5]"));
    assert!(!grain("num_cpus:40"));
    assert!(grain("mem_ratio:0.5"));
    assert!(grain("big:1e+16"));
    assert!(grain("virtual:False"));
    assert!(grain("virtual:false"));
    assert!(!grain("virtual:0"));
    assert!(grain("nothing:None"));
    // An empty dict is indistinguishable from "missing" in Salt.
    assert!(!grain("empty:*"));
}

#[test]
fn grain_nested_and_lists() {
    assert!(grain("deep:a:b:leaf"));
    assert!(grain("deep:a:b:LE*"));
    assert!(!grain("deep:a:b:other"));
    // A dict value: the pattern can name a key, or be `*`.
    assert!(grain("pkgs:nginx"));
    assert!(grain("pkgs:*"));
    assert!(!grain("pkgs:apache"));
    assert!(grain("pkgs:nginx:1.24"));
    assert!(grain("pkgs:nginx:1.*"));
    // Keys are matched as values are: lowercased and globbed.
    assert!(grain("pkgs:NGINX"));
    assert!(grain("pkgs:ngi*"));
    // The top-level key is looked up, not matched.
    assert!(!grain("pk*:ngi*"));
    assert!(!grain("pkgs:apache*"));
    // List-valued grains: any element.
    assert!(grain("roles:web"));
    assert!(grain("roles:DB"));
    assert!(!grain("roles:cache"));
    assert!(grain("ipv4:10.0.0.*"));
    // Indexing into lists, also from the end.
    assert!(grain("roles:0:web"));
    assert!(grain("roles:-1:db"));
    assert!(!grain("roles:0:db"));
    assert!(!grain("roles:5:db"));
    // Lists of dicts: keys of the embedded dicts.
    assert!(grain("disks:name:sda"));
    assert!(grain("disks:size:100"));
    assert!(grain("disks:name:sdb"));
    // A bare value is not looked for inside embedded dicts.
    assert!(!grain("disks:sdb"));
    assert!(grain("disks:1:name:sdb"));
    assert!(grain("disks:name"));
    // The dict itself is matched by its Python repr.
    assert!(grain("disks:{'name': 'sda'*"));
}

#[test]
fn grain_values_with_the_delimiter() {
    // `master` = "salt.example.com:4506": the split that leaves
    // "salt.example.com:4506" as the pattern is tried after the deeper ones.
    assert!(grain("master:salt.example.com:4506"));
    assert!(grain("master:*:4506"));
    assert!(!grain("master:salt.example.com"));
    assert!(grain("nested:x:y:value:with:colons"));
    assert!(grain("nested:x:y:value:*"));
    // Traversal always splits the key path, so a key that itself
    // contains the delimiter is only seen by key membership.
    assert!(!grain("deep:a:b:colon-key"));
    assert!(grain("deep:a:b"));
}

#[test]
fn grain_wildcard_key() {
    // `*:value` looks at every top-level grain.
    assert!(grain("*:Debian"));
    assert!(grain("*:10.0.0.5"));
    // Dict-valued grains: by key, one level down only.
    assert!(grain("*:nginx"));
    assert!(!grain("*:leaf"));
    assert!(!grain("*:nowhere"));
}

#[test]
fn grain_pcre_in_compound() {
    assert!(comp("P@os:(RedHat|Fedora|Debian)", "web1"));
    assert!(comp("P@os:deb", "web1"));
    assert!(!comp("P@os:ian", "web1"));
    assert!(comp("P@num_cpus:[0-9]+$", "web1"));
    assert!(comp("P@roles:d.", "web1"));
    // Salt lowercases the pattern too.
    assert!(comp("P@os:DEBIAN$", "web1"));
    // An invalid pattern matches nothing; Salt logs it and goes on.
    assert!(!comp("P@os:(deb", "web1"));
    assert!(comp("P@os:(deb or web1", "web1"));
    assert!(!comp("P@missing:(deb", "web1"));
}

#[test]
fn compound_salt_doc_examples() {
    let g = "webserv* and G@os:Debian or E@web-dc1-srv.*";
    assert!(comp(g, "webserv1"));
    assert!(comp(g, "web-dc1-srv7"));
    assert!(!comp(g, "db1"));
    let ubuntu = {
        let mut g = grains();
        g.insert("os".into(), json!("Ubuntu"));
        g
    };
    assert!(!matches(&json!(g), TargetType::Compound, "webserv1", &ubuntu).unwrap());
    assert!(matches(&json!(g), TargetType::Compound, "web-dc1-srv1", &ubuntu).unwrap());

    assert!(comp("G@os:Debian and webser*", "webser1"));
    assert!(!comp("G@os:Debian and webser*", "db1"));
    assert!(!comp("not web-dc1-srv", "web-dc1-srv"));
    assert!(comp("not web-dc1-srv", "web1"));
    assert!(!comp("* and not G@kernel:Linux", "web1"));
    assert!(comp("* and not G@kernel:Darwin", "web1"));
    assert!(comp("( ms-1 or G@id:ms-3 ) and G@os:Debian", "ms-1"));
    assert!(!comp("( ms-1 or G@id:ms-3 ) and G@os:Debian", "ms-2"));
    assert!(comp("G@os:Debian and L@web1,web2 or E@db.*", "web2"));
    assert!(comp("L@web1,web2,web3", "web3"));
    assert!(!comp("L@web1,web2,web3", "web"));
    assert!(comp(r"E@web\d+", "web42"));
    assert!(comp("G@ipv4:10.0.0.5", "x"));
}

#[test]
fn compound_precedence() {
    // a or (b and c)
    assert!(comp("a or b and c", "a"));
    assert!(!comp("a or b and c", "b"));
    assert!(!comp("( a or b ) and c", "a"));
    // not binds tighter than and/or.
    assert!(comp("not a and *", "b"));
    assert!(!comp("not a and *", "a"));
    assert!(comp("not a or a", "a"));
    assert!(comp("* and not a or a", "a"));
    assert!(!comp("* and not ( a or b )", "b"));
    assert!(comp("not ( a and b )", "a"));
    // Left to right chains.
    assert!(comp("x or y or z or a", "a"));
    assert!(!comp("* and * and * and a", "b"));
    assert!(comp("( ( ( a ) ) )", "a"));
}

#[test]
fn compound_not_without_and() {
    // Salt inserts `and` before a `not` that follows a target or `)`.
    assert!(comp("web* not web2", "web1"));
    assert!(!comp("web* not web2", "web2"));
    assert!(!comp("( web* ) not G@os:Debian", "web1"));
    // `not not` becomes `not and not`, which Python refuses.
    assert_bad_compound("not not web1", "found `and`");
}

#[test]
fn compound_attached_parens() {
    // Salt splits on whitespace only: a parenthesis glued to a word is
    // part of that word's pattern, not grouping.
    assert!(!comp("(web* or db*) and G@os:Debian", "db3"));
    assert!(comp("(web* or db*) and G@os:Debian", "(web1"));
    assert!(comp("(web1 or db*)", "db*)") || !comp("(web1 or db*)", "db1"));
    assert!(comp("E@web(1|2)", "web2"));
    assert!(comp("( E@web(1|2) ) and *", "web1"));
    assert!(comp("( G@os:Debian )", "x"));
    assert_bad_compound("( G@os:Debian)", "never closed");
}

#[test]
fn compound_engines_and_delimiters() {
    // G/P take an optional one-character delimiter before `@`.
    assert!(comp("G;@deep;a;b;leaf", "x"));
    assert!(comp("G;@master;salt.example.com:4506", "x"));
    assert!(!comp("G;@deep:a:b:leaf", "x"));
    assert!(comp("P|@os|^deb", "x"));
    // Operators are lowercase only; anything else is a glob.
    assert!(comp("AND", "AND"));
    assert!(comp("web1@dc", "web1@dc"));
    assert!(comp("E:@x", "E:@x"));
}

#[test]
fn compound_array_form() {
    let words = json!(["web*", "and", "G@os:Debian"]);
    assert!(matches(&words, TargetType::Compound, "web1", &grains()).unwrap());
    assert!(!matches(&words, TargetType::Compound, "db1", &grains()).unwrap());
    // Elements are words; they are not split again.
    let one = json!(["web1 or db1"]);
    assert!(!matches(&one, TargetType::Compound, "web1", &grains()).unwrap());
    assert!(matches!(
        matches(&json!(["web1", 1]), TargetType::Compound, "web1", &grains()),
        Err(TargetError::WrongTgtType { .. })
    ));
    assert!(matches!(
        matches(&json!([]), TargetType::Compound, "web1", &grains()),
        Err(TargetError::BadCompound { .. })
    ));
}

#[test]
fn compound_malformed() {
    assert_bad_compound("", "found the end");
    assert_bad_compound("   ", "found the end");
    assert_bad_compound("and web1", "cannot start with `and`");
    assert_bad_compound("or web1", "cannot start with `or`");
    assert_bad_compound(") web1", "cannot start with `)`");
    assert_bad_compound("web1 and", "found the end");
    assert_bad_compound("web1 or", "found the end");
    assert_bad_compound("not", "found the end");
    assert_bad_compound("web1 and not", "found the end");
    assert_bad_compound("web1 and or db1", "found `or`");
    assert_bad_compound("( web1", "never closed");
    assert_bad_compound("web1 )", "after a complete expression");
    assert_bad_compound("( and web1 )", "cannot directly follow `(`");
    assert_bad_compound("web1 db1", "after a complete expression");
    assert_bad_compound("( web1 db1 )", "inside parentheses");
    // A value followed by `(` is a call: it fails when evaluated...
    assert_bad_compound("web1 ( db1 )", "called");
    assert_bad_compound("( web1 ) ( db1 )", "called");
    // ... and only then, as Python short-circuits.
    assert!(comp("web1 or db1 ( x )", "web1"));
    assert!(!comp("db1 and web1 ( x )", "web1"));
    // `()` is an empty tuple: false.
    assert!(!comp("( )", "web1"));
    assert!(comp("not ( )", "web1"));
    // Words Salt globs.
    assert!(!comp("X@foo", "web1"));
    assert!(comp("X@foo", "X@foo"));
    assert!(comp("G@", "G@"));
    assert!(!comp("G@nocolon", "web1"));
    let deep = |n: usize| format!("{}web1{}", "( ".repeat(n), " )".repeat(n));
    assert!(comp(&deep(MAX_NESTING), "web1"));
    assert_bad_compound(&deep(MAX_NESTING + 1), "nested");
    let long = vec!["web1"; 20_000].join(" or ");
    assert!(comp(&long, "web1"));
    let msg = comp_err("web1 and").to_string();
    assert!(
        msg.starts_with("invalid compound target `web1 and`: "),
        "{msg}"
    );
}

#[test]
fn compound_unsupported_engines() {
    // Without range support Salt fails the whole expression.
    assert_eq!(
        comp_err("web1 or R@%cluster"),
        TargetError::UnsupportedEngine {
            engine: 'R',
            name: "range"
        }
    );
    // maid has no pillar and no resources: those match nothing.
    assert!(!comp("I@role:web", "web1"));
    assert!(!comp("J@role:w.*", "web1"));
    assert!(!comp("T@vm", "web1"));
    assert!(comp("I@role:web or web1", "web1"));
    assert!(comp("M@web1", "web1"));
    // A nodegroup the master did not expand is dropped, as a minion
    // that knows none drops it.
    assert_bad_compound("N@group or web1", "cannot start with `or`");
    assert_bad_compound("web1 or N@group", "found the end");
    assert!(comp("web1 or ( N@group )", "web1"));
    // S@ matches the ipv4/ipv6 grains.
    assert!(comp("S@10.0.0.0/24", "x"));
    assert!(!comp("S@10.1.0.0/24", "x"));
    assert!(!comp("S@bad", "x"));
    assert!(comp("not S@bad", "x"));
}

#[test]
fn compound_bad_regex() {
    assert!(matches!(
        comp_err("web* and E@web(["),
        TargetError::BadRegex { pattern, .. } if pattern == "web(["
    ));
    assert!(matches!(comp_err("* or E@("), TargetError::BadRegex { .. }));
}

#[test]
fn python_reprs() {
    assert_eq!(python::float(1.0), "1.0");
    assert_eq!(python::float(0.5), "0.5");
    assert_eq!(python::float(-2.25), "-2.25");
    assert_eq!(python::float(0.0), "0.0");
    assert_eq!(python::float(-0.0), "-0.0");
    assert_eq!(python::float(1e15), "1000000000000000.0");
    assert_eq!(python::float(1e16), "1e+16");
    assert_eq!(python::float(1.5e16), "1.5e+16");
    assert_eq!(python::float(0.0001), "0.0001");
    assert_eq!(python::float(0.00001), "1e-05");
    assert_eq!(python::float(1.5e-7), "1.5e-07");
    assert_eq!(python::float(1e100), "1e+100");
    assert_eq!(python::float(123.456), "123.456");
    // Two shortest strings round-trip; Python takes the nearer, even one.
    assert_eq!(
        python::float(87_700_567_198_155.0 + 0.125),
        "87700567198155.12"
    );
    assert_eq!(
        python::float(1_670_247_125_337_306.0 + 0.25),
        "1670247125337306.2"
    );
    assert_eq!(python::str(&json!(true)), "True");
    assert_eq!(python::str(&json!(null)), "None");
    assert_eq!(python::str(&json!(-3)), "-3");
    assert_eq!(python::str(&json!(u64::MAX)), "18446744073709551615");
    assert_eq!(
        python::str(&json!({"a": [1, "x", null], "b'": "it's"})),
        r#"{'a': [1, 'x', None], "b'": "it's"}"#
    );
    assert_eq!(python::str_repr("a'\"\\\n"), r#"'a\'"\\\n'"#);
    assert_eq!(py_int(" -2 "), Some(-2));
    assert_eq!(py_int("1_0"), Some(10));
    assert_eq!(py_int("1__0"), None);
    assert_eq!(py_int("x"), None);
    assert_eq!(py_int(""), None);
}

#[test]
fn pillar_targets_read_the_pillar_given_and_nothing_else() {
    let pillar = json!({"role": "web", "deep": {"tier": "front"}, "ports": [80, 443]});
    let pillar = pillar.as_object().unwrap();
    let grains = json!({"role": "db"});
    let grains = grains.as_object().unwrap();
    let with = |tgt: &str, t: TargetType| {
        matches_with_pillar(&json!(tgt), t, "web1", grains, Some(pillar), None).unwrap()
    };
    assert!(with("role:web", TargetType::Pillar));
    assert!(with("deep:tier:fr*", TargetType::Pillar));
    assert!(with("ports:443", TargetType::Pillar));
    assert!(!with("role:db", TargetType::Pillar));
    assert!(with("role:w.b", TargetType::PillarPcre));
    assert!(!with("role:x.*", TargetType::PillarPcre));
    assert!(with("I@role:web and web*", TargetType::Compound));
    assert!(with(
        "J@deep:tier:f.* and not I@role:db",
        TargetType::Compound
    ));
    // The grains are not the pillar, and without a pillar nothing matches.
    assert!(!with("I@role:db", TargetType::Compound));
    let without = |tgt: &str, t: TargetType| {
        matches_with_pillar(&json!(tgt), t, "web1", grains, None, None).unwrap()
    };
    assert!(!without("role:web", TargetType::Pillar));
    assert!(!without("I@role:web", TargetType::Compound));
    assert!(without("I@role:web or web1", TargetType::Compound));
    assert!(reads_pillar(
        &json!("web* and I@role:web"),
        TargetType::Compound
    ));
    assert!(reads_pillar(&json!(["J@a:b"]), TargetType::Compound));
    assert!(reads_pillar(&json!("a:b"), TargetType::PillarPcre));
    assert!(!reads_pillar(
        &json!("web* and G@role:web"),
        TargetType::Compound
    ));
    assert!(!reads_pillar(&json!("I@role:web"), TargetType::Glob));
}

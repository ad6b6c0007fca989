//! `maid key`: the maids' keys, managed as `salt-key` manages minion keys —
//! the same flags, prompts, output and exit status. Maids present their
//! keys through the registry; each run files what the registry carries
//! ([`Pki::submit_registry`]) before it lists or acts, as Salt's master
//! files each authentication attempt.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::{ArgGroup, Args, ValueEnum};
use redis::AsyncCommands;
use serde_json::{Map, Value};

use crate::output::ColorOpts;
use maid_salt::output::colors::{self, tinted};

use crate::master::MasterOpts;
use crate::rt::block_on;
use maid_master::pki::{KeyState, Pki, check_id, fingerprint};

/// How `maid key` prints (`salt-key --out`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeyOut {
    /// salt-key's own listing.
    Key,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("action").args([
    "list_all", "list", "accept", "accept_all", "reject", "reject_all", "delete", "delete_all",
    "finger", "finger_all", "print", "print_all",
])))]
pub struct KeyArgs {
    /// List every key (the default action).
    #[arg(short = 'L', long = "list-all")]
    pub list_all: bool,
    /// List the keys in one state: pre (or un, unaccepted), acc
    /// (accepted), rej (rejected), den (denied), or all. `-l` as salt-key
    /// spells it, after `key` (elsewhere `-l` is the log level).
    #[arg(long, value_name = "STATE", value_parser = [
        "pre", "un", "unaccepted", "acc", "accept", "accepted", "rej", "reject", "rejected",
        "den", "denied", "all",
    ])]
    pub list: Option<String>,
    /// Accept the pending keys that ID (a glob, or globs joined by `,`)
    /// matches.
    #[arg(short = 'a', long, value_name = "ID")]
    pub accept: Option<String>,
    /// Accept every pending key.
    #[arg(short = 'A', long)]
    pub accept_all: bool,
    /// Reject the pending keys that ID matches.
    #[arg(short = 'r', long, value_name = "ID")]
    pub reject: Option<String>,
    /// Reject every pending key.
    #[arg(short = 'R', long)]
    pub reject_all: bool,
    /// Delete the keys that ID matches, in any state.
    #[arg(short = 'd', long, value_name = "ID")]
    pub delete: Option<String>,
    /// Delete every key.
    #[arg(short = 'D', long)]
    pub delete_all: bool,
    /// Print the fingerprints of the keys that ID matches.
    #[arg(short = 'f', long, value_name = "ID")]
    pub finger: Option<String>,
    /// Print every key's fingerprint.
    #[arg(short = 'F', long)]
    pub finger_all: bool,
    /// Print the keys that ID matches.
    #[arg(short = 'p', long, value_name = "ID")]
    pub print: Option<String>,
    /// Print every key.
    #[arg(short = 'P', long)]
    pub print_all: bool,
    /// Answer yes to every question.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Accept and delete also act on rejected keys.
    #[arg(long)]
    pub include_rejected: bool,
    /// Accept, reject and delete also act on denied keys.
    #[arg(long)]
    pub include_denied: bool,
    /// Reject also acts on accepted keys.
    #[arg(long)]
    pub include_accepted: bool,
    /// Act on keys in every state.
    #[arg(long)]
    pub include_all: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = KeyOut::Key)]
    pub out: KeyOut,
    #[command(flatten)]
    pub color: ColorOpts,
    #[command(flatten)]
    pub master: MasterOpts,
}

/// What a state-changing action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Accept,
    Reject,
    Delete,
}

impl Change {
    fn verb(self) -> &'static str {
        match self {
            Change::Accept => "accepted",
            Change::Reject => "rejected",
            Change::Delete => "deleted",
        }
    }

    /// The states it takes keys from, as `salt-key`'s `_filter_ret`.
    fn sources(self, args: &KeyArgs) -> Vec<KeyState> {
        let all = args.include_all;
        let mut from = match self {
            Change::Delete => return KeyState::ALL.to_vec(),
            _ => vec![KeyState::Pending],
        };
        if matches!(self, Change::Accept) && (all || args.include_rejected) {
            from.push(KeyState::Rejected);
        }
        if matches!(self, Change::Reject) && (all || args.include_accepted) {
            from.push(KeyState::Accepted);
        }
        if all || args.include_denied {
            from.push(KeyState::Denied);
        }
        from
    }

    /// The states named in the no-match message.
    fn described(self, args: &KeyArgs) -> &'static str {
        let all = args.include_all;
        match self {
            Change::Accept if all || (args.include_rejected && args.include_denied) => {
                "unaccepted, rejected or denied"
            }
            Change::Accept if args.include_rejected => "unaccepted or rejected",
            Change::Reject if all || args.include_accepted => "unaccepted or accepted",
            _ => "unaccepted",
        }
    }
}

/// Whether `id` matches one of the comma-separated globs of `pattern`.
fn matches(pattern: &str, id: &str) -> bool {
    pattern.split(',').any(|glob| {
        globset::GlobBuilder::new(glob)
            .literal_separator(false)
            .build()
            .map(|g| g.compile_matcher().is_match(id))
            .unwrap_or(false)
    })
}

/// Ids by state, for the listing.
type Listing = BTreeMap<KeyState, Vec<String>>;

/// `salt-key`'s key outputter: every state's heading in its order, then
/// its ids (or `id:  value` lines), one per line; in the key outputter's
/// colours when `color`.
fn render(
    listing: &BTreeMap<KeyState, Vec<(String, Option<String>)>>,
    every: bool,
    color: bool,
) -> String {
    let mut out = String::new();
    for state in KeyState::ALL {
        let entries = listing.get(&state);
        // Without `every`, the states `listing` holds (`-l`'s one, even
        // empty, as Salt's key outputter prints its heading).
        if !every && entries.is_none() {
            continue;
        }
        let (heading, entry) = tints(state);
        out.push_str(&tinted(color, heading, state.heading()));
        out.push('\n');
        for (id, value) in entries.into_iter().flatten() {
            let line = match value {
                Some(v) => format!("{id}:  {v}"),
                None => id.clone(),
            };
            out.push_str(&tinted(color, entry, &line));
            out.push('\n');
        }
    }
    out
}

/// The key outputter's colours for a state: its heading's, its entries'.
fn tints(state: KeyState) -> (&'static str, &'static str) {
    match state {
        KeyState::Accepted => (colors::LIGHT_GREEN, colors::GREEN),
        KeyState::Denied => (colors::LIGHT_MAGENTA, colors::MAGENTA),
        KeyState::Pending => (colors::LIGHT_RED, colors::RED),
        KeyState::Rejected => (colors::LIGHT_BLUE, colors::BLUE),
    }
}

/// The listing in Salt's shape: `{"minions": [...], ...}`, its states in
/// the order `salt-key --out json` writes them (pending, rejected,
/// accepted, denied; `--out yaml` sorts them).
fn as_json(listing: &BTreeMap<KeyState, Vec<(String, Option<String>)>>) -> Value {
    let mut map = Map::new();
    let order = [
        KeyState::Pending,
        KeyState::Rejected,
        KeyState::Accepted,
        KeyState::Denied,
    ];
    for (state, entries) in order.iter().filter_map(|s| listing.get(s).map(|e| (s, e))) {
        let value = if entries.iter().all(|(_, v)| v.is_none()) {
            Value::from(entries.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>())
        } else {
            Value::Object(
                entries
                    .iter()
                    .map(|(id, v)| (id.clone(), Value::from(v.clone().unwrap_or_default())))
                    .collect(),
            )
        };
        map.insert(state.dir().into(), value);
    }
    Value::Object(map)
}

fn print_listing(
    listing: &BTreeMap<KeyState, Vec<(String, Option<String>)>>,
    every: bool,
    out: KeyOut,
    color: bool,
) -> anyhow::Result<()> {
    match out {
        KeyOut::Key => out!("{}", render(listing, every, color)),
        KeyOut::Json => outln!("{}", salt_json(&as_json(listing))),
        KeyOut::Yaml => out!("{}", salt_yaml(&as_json(listing))?),
    }
    Ok(())
}

/// JSON as Salt's `json` outputter writes it: indented by four spaces.
fn salt_json(value: &Value) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    value.serialize(&mut ser).expect("JSON values serialise");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// YAML as Salt's `yaml` outputter writes it: keys sorted.
fn salt_yaml(value: &Value) -> anyhow::Result<String> {
    let sorted: BTreeMap<&String, &Value> = value
        .as_object()
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    Ok(serde_yaml_ng::to_string(&sorted)?)
}

/// Ask `question` on the terminal; `default` is the answer to an empty
/// line. The end of standard input (closed, `</dev/null`, a script's pipe)
/// answers no, whatever the default: nothing is accepted or deleted that
/// nobody agreed to. Salt's `input()` raises there, so salt-key says
/// `Error: EOF when reading a line`, changes nothing and exits 0; so does
/// this, in words of its own.
fn confirm(question: &str, default: bool) -> anyhow::Result<bool> {
    out!("{question}");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        outln!();
        eprintln!("maid: no answer (end of standard input): nothing changed; -y answers yes");
        return Ok(false);
    }
    let answer = line.trim();
    Ok(if answer.is_empty() {
        default
    } else {
        answer.starts_with(['y', 'Y'])
    })
}

/// File what the registry carries, when Redis answers; the keys on disk
/// are listed and changed either way. A registry entry whose id is no
/// minion id ([`check_id`]) is passed over by the filing; it is named
/// here, on standard error, so that the operator sees it and the rest are
/// listed and accepted as ever.
fn refresh(pki: &Pki, config: &maid_config::Config) -> anyhow::Result<()> {
    let bus = maid_bus::Bus::new(&config.redis)?;
    let result = block_on(async {
        let mut conn = bus.connect().await?;
        let ids: Vec<String> = conn.hkeys(maid_protocol::protocol::REGISTRY_KEY).await?;
        maid_master::jobs::file_keys(&mut conn, pki).await?;
        anyhow::Ok(ids)
    })?;
    match result {
        Ok(ids) => {
            for e in ids.iter().filter_map(|id| check_id(id).err()) {
                eprintln!("maid: registry entry skipped: {e}");
            }
        }
        Err(e) => eprintln!("maid: keys not refreshed from the registry: {e:#}"),
    }
    Ok(())
}

pub fn run(args: KeyArgs) -> anyhow::Result<ExitCode> {
    let config = args.master.config()?;
    let pki = args
        .master
        .pki(&config)
        .context("no key store: pass --pki-dir or set [master] pki_dir")?;
    refresh(&pki, &config)?;
    let all = |x: bool, one: &Option<String>| -> Option<String> {
        if x { Some("*".into()) } else { one.clone() }
    };
    let change = [
        (Change::Accept, all(args.accept_all, &args.accept)),
        (Change::Reject, all(args.reject_all, &args.reject)),
        (Change::Delete, all(args.delete_all, &args.delete)),
    ]
    .into_iter()
    .find_map(|(c, p)| p.map(|p| (c, p)));
    if let Some((change, pattern)) = change {
        return apply(&pki, &args, change, &pattern);
    }
    let listing: Listing = pki.list()?;
    if let Some(pattern) = all(args.finger_all, &args.finger) {
        return show(&pki, &args, &config, &listing, &pattern, fingerprint, true);
    }
    if let Some(pattern) = all(args.print_all, &args.print) {
        return show(
            &pki,
            &args,
            &config,
            &listing,
            &pattern,
            str::to_string,
            false,
        );
    }
    let only = args.list.as_deref().and_then(listed_state);
    let plain: BTreeMap<KeyState, Vec<(String, Option<String>)>> = KeyState::ALL
        .into_iter()
        .filter(|state| only.is_none_or(|o| o == *state))
        .map(|state| {
            let ids = listing.get(&state).cloned().unwrap_or_default();
            (state, ids.into_iter().map(|id| (id, None)).collect())
        })
        .collect();
    print_listing(&plain, only.is_none(), args.out, args.color.on())?;
    Ok(ExitCode::SUCCESS)
}

/// The state `salt-key -l STATE` lists, as Salt's `list_status` reads its
/// word by its beginning; `None` for `all`.
fn listed_state(word: &str) -> Option<KeyState> {
    if word.starts_with("acc") {
        Some(KeyState::Accepted)
    } else if word.starts_with("pre") || word.starts_with("un") {
        Some(KeyState::Pending)
    } else if word.starts_with("rej") {
        Some(KeyState::Rejected)
    } else if word.starts_with("den") {
        Some(KeyState::Denied)
    } else {
        None
    }
}

/// `argv` with `salt-key`'s `-l STATE` after `maid key` spelt `--list`:
/// everywhere else `-l` is the log level, as `salt`'s.
pub fn key_list_short(argv: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    // The subcommand is the first word that is neither an option nor the
    // value of a global option that takes one.
    let mut at = None;
    let mut i = 1;
    while i < argv.len() {
        let word = argv[i].to_string_lossy();
        if matches!(&*word, "-l" | "--log-level" | "--log-format") {
            i += 2;
            continue;
        }
        if !word.starts_with('-') {
            at = (word == "key").then_some(i);
            break;
        }
        i += 1;
    }
    let Some(at) = at else {
        return argv;
    };
    let mut out = argv[..=at].to_vec();
    for word in &argv[at + 1..] {
        let text = word.to_string_lossy();
        if text == "-l" {
            out.push("--list".into());
        } else if let Some(state) = text.strip_prefix("-l").filter(|s| !s.starts_with('-')) {
            out.push(format!("--list={state}").into());
        } else {
            out.push(word.clone());
        }
    }
    out
}

/// `-f`/`-F` and `-p`/`-P`: each matching key's `value`, by state; the
/// fingerprints also show the master's own key first ("Local Keys").
fn show(
    pki: &Pki,
    args: &KeyArgs,
    config: &maid_config::Config,
    listing: &Listing,
    pattern: &str,
    value: impl Fn(&str) -> String,
    local: bool,
) -> anyhow::Result<ExitCode> {
    let mut shown: BTreeMap<KeyState, Vec<(String, Option<String>)>> = BTreeMap::new();
    for (state, ids) in listing {
        for id in ids.iter().filter(|id| matches(pattern, id)) {
            if let Some(text) = pki.key(*state, id)? {
                shown
                    .entry(*state)
                    .or_default()
                    .push((id.clone(), Some(value(&text))));
            }
        }
    }
    let local_keys: Vec<(String, String)> = match args.master.key_path(config) {
        Some(path) if local => {
            let public = path.with_extension("pub");
            std::fs::read_to_string(&public)
                .ok()
                .map(|text| {
                    let name = public
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    vec![(name, fingerprint(&text))]
                })
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    if args.out == KeyOut::Key {
        if !local_keys.is_empty() {
            let color = args.color.on();
            outln!("{}", tinted(color, colors::LIGHT_MAGENTA, "Local Keys:"));
            for (name, fp) in &local_keys {
                outln!(
                    "{}",
                    tinted(color, colors::MAGENTA, &format!("{name}:  {fp}"))
                );
            }
        }
        out!("{}", render(&shown, false, args.color.on()));
    } else {
        let mut json = as_json(&shown);
        if !local_keys.is_empty() {
            json["local"] = Value::Object(
                local_keys
                    .into_iter()
                    .map(|(n, f)| (n, Value::String(f)))
                    .collect(),
            );
        }
        match args.out {
            KeyOut::Yaml => out!("{}", salt_yaml(&json)?),
            _ => outln!("{}", salt_json(&json)),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `-a`, `-r`, `-d` and their every-key forms: show what matches, ask
/// (unless `-y`), act, and say what was done — as `salt-key` does.
fn apply(pki: &Pki, args: &KeyArgs, change: Change, pattern: &str) -> anyhow::Result<ExitCode> {
    let mut matched: BTreeMap<KeyState, Vec<(String, Option<String>)>> = BTreeMap::new();
    for state in change.sources(args) {
        for id in pki
            .ids(state)?
            .into_iter()
            .filter(|id| matches(pattern, id))
        {
            matched.entry(state).or_default().push((id, None));
        }
    }
    if matched.is_empty() {
        outln!(
            "The key glob '{pattern}' does not match any {} keys.",
            change.described(args)
        );
        return Ok(ExitCode::SUCCESS);
    }
    if change == Change::Accept {
        warn_of_syndic_roles(pki, &matched)?;
    }
    if !args.yes {
        outln!("The following keys are going to be {}:", change.verb());
        out!("{}", render(&matched, false, args.color.on()));
        let proceed = match change {
            Change::Delete => confirm("Proceed? [N/y] ", false)?,
            _ => confirm("Proceed? [n/Y] ", true)?,
        };
        if !proceed {
            return Ok(ExitCode::SUCCESS);
        }
    }
    for (state, entries) in &matched {
        for (id, _) in entries {
            let done = match change {
                Change::Accept => pki.transfer(id, *state, KeyState::Accepted)?,
                Change::Reject => pki.transfer(id, *state, KeyState::Rejected)?,
                Change::Delete => pki.delete(*state, id)?,
            };
            if done {
                outln!("Key for minion {id} {}.", change.verb());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Say, on stderr (stdout is `salt-key`'s), which of the keys about to be
/// accepted were filed as syndic maids': accepting one accepts the role,
/// and that maid may then answer for the minions beneath it (PROTOCOL
/// v1.2 §7).
fn warn_of_syndic_roles(
    pki: &Pki,
    matched: &BTreeMap<KeyState, Vec<(String, Option<String>)>>,
) -> anyhow::Result<()> {
    for (state, entries) in matched {
        for (id, _) in entries {
            if let Some(key) = pki.key(*state, id)?
                && maid_master::registry::is_syndic_key(pki, id, &key)
            {
                eprintln!(
                    "maid: {id} presented its key as a syndic maid's: accepted, it answers for \
                     the minions beneath it"
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_is_salt_keys() {
        let listing: BTreeMap<KeyState, Vec<(String, Option<String>)>> = BTreeMap::from([
            (KeyState::Accepted, vec![("a1".into(), None)]),
            (
                KeyState::Pending,
                vec![("p1".into(), None), ("p2".into(), None)],
            ),
        ]);
        assert_eq!(
            render(&listing, true, false),
            "Accepted Keys:\na1\nDenied Keys:\nUnaccepted Keys:\np1\np2\nRejected Keys:\n"
        );
        assert_eq!(
            render(&listing, false, false),
            "Accepted Keys:\na1\nUnaccepted Keys:\np1\np2\n"
        );
        // `-l den`: its heading, though it holds nobody.
        let denied = BTreeMap::from([(KeyState::Denied, vec![])]);
        assert_eq!(render(&denied, false, false), "Denied Keys:\n");
        let words =
            |w: &[&str]| -> Vec<std::ffi::OsString> { w.iter().map(|s| s.into()).collect() };
        assert_eq!(
            key_list_short(words(&["maid", "-l", "debug", "key", "-l", "acc", "-lrej"])),
            words(&["maid", "-l", "debug", "key", "--list", "acc", "--list=rej"])
        );
        assert_eq!(
            key_list_short(words(&["maid", "run", "-l", "debug", "*", "test.ping"])),
            words(&["maid", "run", "-l", "debug", "*", "test.ping"])
        );
        let shown = BTreeMap::from([(
            KeyState::Accepted,
            vec![("a1".into(), Some("ab:cd".into()))],
        )]);
        assert_eq!(render(&shown, false, false), "Accepted Keys:\na1:  ab:cd\n");
        assert_eq!(
            as_json(&listing),
            serde_json::json!({"minions": ["a1"], "minions_pre": ["p1", "p2"]})
        );
        // Byte for byte as salt-key 3008.4 --out json writes it.
        let all: BTreeMap<KeyState, Vec<(String, Option<String>)>> = BTreeMap::from([
            (KeyState::Accepted, vec![("web1".into(), None)]),
            (KeyState::Denied, vec![("web1".into(), None)]),
            (
                KeyState::Pending,
                vec![("app1".into(), None), ("db1".into(), None)],
            ),
            (KeyState::Rejected, vec![("bad1".into(), None)]),
        ]);
        assert_eq!(
            salt_json(&as_json(&all)),
            "{\n    \"minions_pre\": [\n        \"app1\",\n        \"db1\"\n    ],\n    \
             \"minions_rejected\": [\n        \"bad1\"\n    ],\n    \"minions\": [\n        \
             \"web1\"\n    ],\n    \"minions_denied\": [\n        \"web1\"\n    ]\n}"
        );
    }

    #[test]
    fn ids_match_comma_separated_globs() {
        assert!(matches("web*", "web1"));
        assert!(matches("db1,web*", "db1"));
        assert!(!matches("web*", "db1"));
        assert!(matches("*", "anything.example.com"));
    }
}

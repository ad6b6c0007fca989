//! Salt's language, as maid speaks it at its edges: which minions a target
//! selects, how a command line's arguments are read, how Python would print
//! a value, and how returns are printed.
//!
//! * [`target`]: Salt's matchers (glob, list, grain, pcre, ipcidr,
//!   compound, nodegroups), deciding whether a job targets a minion.
//! * [`args`]: `salt.utils.args.parse_input` and `load_args_and_kwargs`.
//! * [`dictupdate`]: how Salt merges pillar; [`data`]: nested keys read as
//!   `traverse_dict_and_list` reads them.
//! * [`python`]: Python's `str()`, `repr()` and `bool()` of JSON values —
//!   the one module plugins take (through the SDK).
//! * [`pyre`]: Python's `re` syntax, for matchers and modules that take it.
//! * [`yaml11`]: YAML read with Salt's 1.1 rules.
//! * [`output`]: Salt's outputters (`nested`, `json`, `yaml`, `txt`,
//!   `table`, `raw`, `pprint`).
//! * [`files`]: `salt://` paths.
//! * [`jid`]: a jid's time, as Salt prints it.
//!
//! Pure: no Redis, no WebAssembly runtime, no HTTP.

/// The Salt release maid implements and answers as, minion and master
/// alike: the `saltversion` grains, `test.version`, `manage.versions`, what
/// consoles (SaltGUI) compare minions against. maid's own version is the
/// `maidversion` grain and `test.versions_information`'s `Maid`.
pub const SALT_VERSION: &str = "3008.4";

pub mod data;
pub mod dictupdate;
pub mod python;

#[cfg(feature = "full")]
pub mod args;
#[cfg(feature = "full")]
pub mod files;
#[cfg(feature = "full")]
pub mod jid;
#[cfg(feature = "full")]
pub mod output;
#[cfg(feature = "full")]
pub mod pyre;
#[cfg(feature = "full")]
pub mod target;
#[cfg(feature = "full")]
pub mod yaml11;

//! Salt's command-line argument rules: `key=value` splitting and YAML
//! reading of every value, then the `__kwarg__` folding of the wire form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use maid_salt::args;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let words: Vec<String> = text.split('\0').map(str::to_owned).collect();
    let (positional, mut kwargs) = args::parse_cli(&words);
    let _ = args::load_args_and_kwargs(positional, &mut kwargs);
});

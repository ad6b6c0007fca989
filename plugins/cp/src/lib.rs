//! Salt's `cp` module: copy `salt://` sources onto the minion, and list
//! what `salt://` holds.
//!
//! Sources come through the host's `fetch` capability (listings through
//! its `list`, which shows only what the `fetch` grant opens); files are written
//! with WASI through the directories the agent preopens for this plugin, so
//! a destination outside them (by absolute path, `../` or a symlink) is
//! refused by the sandbox itself, not by a check in this code.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use maid_sdk::fs::at;
use maid_sdk::host::{self, Source};
use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, function};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256, Sha512};

struct Cp;

#[derive(Deserialize)]
struct GetFile {
    path: String,
    dest: String,
    #[serde(default)]
    saltenv: Option<serde_json::Value>,
    #[serde(default)]
    makedirs: bool,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    gzip: Option<u32>,
}

#[derive(Deserialize)]
struct HashFile {
    path: String,
    #[serde(default)]
    saltenv: Option<serde_json::Value>,
    #[serde(default)]
    hash_type: Option<String>,
}

#[derive(Deserialize)]
struct GetFileStr {
    path: String,
    #[serde(default)]
    saltenv: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RecvChunked {
    dest: String,
    /// Base64 of the chunk; `None` makes `dest` an (empty) directory.
    chunk: Option<String>,
    append: bool,
    compressed: bool,
    mode: Option<u32>,
}

#[derive(Deserialize)]
struct ListMaster {
    #[serde(default)]
    saltenv: Option<serde_json::Value>,
    #[serde(default)]
    prefix: Option<serde_json::Value>,
}

const CHUNK: usize = 1 << 20;

/// Salt's text of an argument (`str()` of what YAML or the CLI gave).
fn text(v: &Option<serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The listing of `saltenv` (an unset or empty one is the minion's,
/// `base`) under `prefix`; an environment the file server does not have
/// lists nothing, as Salt's.
fn listing(a: &ListMaster) -> Result<host::Listing, Error> {
    let saltenv = text(&a.saltenv);
    let saltenv = if saltenv.is_empty() { "base" } else { &saltenv };
    host::list(saltenv, &text(&a.prefix))
}

/// List the files on the master (salt://), sorted; PREFIX limits the list to paths that begin with it
#[function(args = ["saltenv=null", "prefix=\"\""])]
fn list_master(a: ListMaster) -> Result<Vec<String>, Error> {
    Ok(listing(&a)?.files)
}

/// List the directories on the master (salt://), sorted; PREFIX limits the list to paths that begin with it
#[function(args = ["saltenv=null", "prefix=\"\""])]
fn list_master_dirs(a: ListMaster) -> Result<Vec<String>, Error> {
    Ok(listing(&a)?.dirs)
}

/// List the SLS names available on the master (a/b.sls and a/b/init.sls are a.b), sorted
#[function(args = ["saltenv=null"])]
fn list_states(a: ListMaster) -> Result<Vec<String>, Error> {
    let a = ListMaster {
        saltenv: a.saltenv,
        prefix: None,
    };
    let files = listing(&a)?.files;
    Ok(sls_names(&files))
}

/// `fileclient.list_states`: each `.sls` file as an SLS name, an
/// `init.sls` as its directory's; sorted, once each.
fn sls_names(files: &[String]) -> Vec<String> {
    let states: std::collections::BTreeSet<String> = files
        .iter()
        .filter_map(|path| {
            let dotted = path.replace('/', ".");
            if path.ends_with("/init.sls") {
                Some(dotted[..dotted.len() - "/init.sls".len()].to_string())
            } else {
                path.strip_suffix(".sls").map(|p| p.replace('/', "."))
            }
        })
        .collect();
    states.into_iter().collect()
}

/// `url` opened in `saltenv` (its own `?saltenv=` wins, as Salt's
/// `split_env`).
fn open(url: &str, saltenv: &Option<serde_json::Value>) -> Result<Option<Source>, Error> {
    if !url.starts_with("salt://") {
        return Err(Error::bad_arguments(format!(
            "only salt:// sources are supported, not {url:?}"
        )));
    }
    host::fetch(&maid_sdk::salt::url_in(url, Some(&text(saltenv))))
}

/// Where the file lands: into `dest` when it is a directory (or ends in
/// `/`), else at `dest` itself.
fn target(src: &str, dest: &str) -> PathBuf {
    let name = src.rsplit('/').next().unwrap_or(src);
    let dest_path = Path::new(dest);
    if dest.ends_with('/') || dest_path.is_dir() {
        dest_path.join(name)
    } else {
        dest_path.to_path_buf()
    }
}

/// Copy a salt:// source to DEST; return DEST, or '' if the source is missing
#[function(args = ["path", "dest", "saltenv", "makedirs", "template", "gzip"])]
fn get_file(a: GetFile, call: &Call) -> Result<String, Error> {
    if a.template.is_some() {
        return Err(Error::bad_arguments("template rendering is not supported"));
    }
    if a.gzip.is_some() {
        return Err(Error::bad_arguments("gzip transfer is not supported"));
    }
    let Some(mut src) = open(&a.path, &a.saltenv)? else {
        // Salt's answer for a missing source.
        return Ok(String::new());
    };
    let dest = target(&a.path, &a.dest);
    if !Path::new(&a.dest).is_absolute() {
        return Err(Error::bad_arguments(format!(
            "dest must be an absolute path, not {:?}",
            a.dest
        )));
    }
    maid_sdk::fs::check_write(&dest)?;
    let dir = dest
        .parent()
        .ok_or_else(|| Error::bad_arguments("dest has no parent directory"))?;
    if a.makedirs {
        fs::create_dir_all(dir).map_err(at(dir, "cannot create"))?;
    } else {
        match fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::failed(
                    format!(
                        "destination directory {} does not exist; pass makedirs=True",
                        dir.display()
                    ),
                    1,
                ));
            }
            // Outside every granted directory: the sandbox says so.
            Err(e) => return Err(at(dir, "cannot write")(e)),
            Ok(_) => {
                return Err(Error::failed(
                    format!("{} is not a directory", dir.display()),
                    1,
                ));
            }
        }
    }
    maid_sdk::fs::write_source(&mut src, &a.path, &dest, &call.context.jid)?;
    Ok(dest.display().to_string())
}

/// Return the content of a salt:// source as a string, or False if missing
#[function(args = ["path", "saltenv"])]
fn get_file_str(a: GetFileStr) -> Result<serde_json::Value, Error> {
    let Some(mut src) = open(&a.path, &a.saltenv)? else {
        return Ok(json!(false));
    };
    let mut bytes = Vec::new();
    src.read_to_end(&mut bytes)
        .map_err(at(Path::new(&a.path), "cannot read"))?;
    Ok(json!(String::from_utf8_lossy(&bytes)))
}

/// Write one chunk of a file salt-cp -C sends (or make DEST a directory); return True
// Salt's `cp.recv_chunked`, what `salt-cp -C` (and `maid cp -C`) sends:
// one chunk of a file written (or appended) at `dest`, its directory made
// when missing, the mode set with the first chunk; or `dest` made a
// directory. Writes go through the granted directories only, as
// `get_file`'s do.
#[function(args = ["dest", "chunk", "append=false", "compressed=true", "mode=null"])]
fn recv_chunked(a: RecvChunked) -> Result<serde_json::Value, Error> {
    use std::io::Write;

    let dest = Path::new(&a.dest);
    if !dest.is_absolute() {
        return Err(Error::bad_arguments(format!(
            "dest must be an absolute path, not {:?}",
            a.dest
        )));
    }
    maid_sdk::fs::check_write(dest)?;
    let Some(chunk) = a.chunk else {
        return match fs::create_dir_all(dest) {
            Ok(()) => Ok(json!(true)),
            // Salt's answer, a success.
            Err(_) if dest.is_file() => Ok(json!("Path exists and is a file")),
            Err(e) => Err(at(dest, "cannot create")(e)),
        };
    };
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD
        .decode(chunk.trim())
        .map_err(|e| Error::failed(format!("the chunk is not base64: {e}"), 1))?;
    let data = if a.compressed {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&data[..])
            .read_to_end(&mut plain)
            .map_err(|e| Error::failed(format!("the chunk is not gzip: {e}"), 1))?;
        plain
    } else {
        data
    };
    let open = || {
        let mut options = fs::OpenOptions::new();
        if a.append {
            options.append(true).create(true);
        } else {
            options.write(true).create(true).truncate(true);
        }
        options.open(dest)
    };
    let mut file = match open() {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = dest.parent() {
                fs::create_dir_all(dir).map_err(at(dir, "cannot create"))?;
            }
            open().map_err(at(dest, "cannot write"))?
        }
        Err(e) => return Err(at(dest, "cannot write")(e)),
    };
    file.write_all(&data).map_err(at(dest, "cannot write"))?;
    if !a.append
        && let Some(mode) = a.mode
    {
        host::set_mode(&a.dest, mode & 0o7777)?;
    }
    Ok(json!(true))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest<D: Digest>(mut reader: impl Read, what: &Path) -> Result<String, Error> {
    let mut hasher = D::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = reader.read(&mut buf).map_err(at(what, "cannot read"))?;
        if n == 0 {
            return Ok(hex(&hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

/// Return {hash_type, hsum} of a salt:// source or a local file
#[function(args = ["path", "saltenv", "hash_type"])]
fn hash_file(a: HashFile) -> Result<serde_json::Value, Error> {
    let hash_type = a.hash_type.unwrap_or_else(|| "sha256".into());
    let path = Path::new(&a.path);
    let hsum = if a.path.starts_with("salt://") {
        let Some(src) = open(&a.path, &a.saltenv)? else {
            return Ok(json!({}));
        };
        match hash_type.as_str() {
            "sha256" => src.sha256().to_string(),
            "sha512" => digest::<Sha512>(src, path)?,
            other => return Err(unsupported(other)),
        }
    } else {
        maid_sdk::fs::check_read(path)?;
        let file = fs::File::open(path).map_err(at(path, "cannot read"))?;
        match hash_type.as_str() {
            "sha256" => digest::<Sha256>(file, path)?,
            "sha512" => digest::<Sha512>(file, path)?,
            other => return Err(unsupported(other)),
        }
    };
    Ok(json!({"hash_type": hash_type, "hsum": hsum}))
}

fn unsupported(hash_type: &str) -> Error {
    Error::bad_arguments(format!(
        "hash_type {hash_type:?} is not supported (use sha256 or sha512)"
    ))
}

impl Plugin for Cp {
    const MODULE: &'static str = "cp";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] =
        &[Capability::Fetch, Capability::FsRead, Capability::FsWrite];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            get_file,
            get_file_str,
            recv_chunked,
            hash_file,
            list_master,
            list_master_dirs,
            list_states
        ]
    }
}

export_plugin!(Cp);

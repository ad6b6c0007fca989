//! Salt 3008.4's `locale_info` grain: Python's `locale.getlocale()` of
//! the locale the environment selects (with Python's C locale coercion),
//! and the zone abbreviation `dateutil`'s `tzlocal()` gives for now.

use serde_json::{Value, json};

#[rustfmt::skip]
mod encodings;
mod tables;

use encodings::{ENCODING_ALIAS, LOCALE_ENCODING_ALIAS};
use tables::LOCALE_ALIAS;

/// The value of `key` in one of Python's sorted alias tables.
fn table<'a>(t: &'a [(&str, &str)], key: &str) -> Option<&'a str> {
    t.binary_search_by(|(k, _)| (*k).cmp(key))
        .ok()
        .map(|i| t[i].1)
}

/// The `LC_CTYPE` locale a Python process started in this environment
/// runs under (what `setlocale(LC_CTYPE, NULL)` answers): `LC_ALL`,
/// `LC_CTYPE` or `LANG`, the first set, when `installed` says the C
/// library has it, else the C locale (`POSIX` is C); without `LC_ALL`,
/// the C locale is coerced to `C.UTF-8` (PEP 538).
pub(crate) fn ctype_locale(
    lc_all: Option<&str>,
    lc_ctype: Option<&str>,
    lang: Option<&str>,
    installed: &dyn Fn(&str) -> bool,
) -> String {
    let set = |v: Option<&str>| v.filter(|s| !s.is_empty()).map(str::to_string);
    let resolve = |name: String| {
        if name == "C" || name == "POSIX" || !installed(&name) {
            "C".to_string()
        } else {
            name
        }
    };
    if let Some(all) = set(lc_all) {
        return resolve(all);
    }
    let name = resolve(set(lc_ctype).or(set(lang)).unwrap_or_else(|| "C".into()));
    if name == "C" { "C.UTF-8".into() } else { name }
}

/// The C library's `_nl_normalize_codeset` applied to a locale name's
/// codeset: `de_DE.UTF-8@euro` is `de_DE.utf8@euro`.
pub(crate) fn normalize_codeset(name: &str) -> String {
    let Some((lang, rest)) = name.split_once('.') else {
        return name.to_string();
    };
    let (codeset, modifier) = match rest.split_once('@') {
        Some((c, m)) => (c, Some(m)),
        None => (rest, None),
    };
    let mut norm: String = codeset
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if !norm.is_empty() && norm.bytes().all(|b| b.is_ascii_digit()) {
        norm.insert_str(0, "iso");
    }
    match modifier {
        Some(m) => format!("{lang}.{norm}@{m}"),
        None => format!("{lang}.{norm}"),
    }
}

/// The locale names a glibc `locale-archive` holds; `None` when the data
/// is not one.
pub(crate) fn archive_names(data: &[u8]) -> Option<Vec<String>> {
    const MAGIC: usize = 0xde02_0109;
    let word = |at: usize, le: bool| -> Option<usize> {
        let b: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
        let v = if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        };
        usize::try_from(v).ok()
    };
    let le = match (word(0, true), word(0, false)) {
        (Some(MAGIC), _) => true,
        (_, Some(MAGIC)) => false,
        _ => return None,
    };
    let table = word(8, le)?;
    let size = word(16, le)?;
    let mut names = Vec::new();
    for n in 0..size {
        let entry = table.checked_add(n.checked_mul(12)?)?;
        let (name_at, rec) = (word(entry + 4, le)?, word(entry + 8, le)?);
        if name_at == 0 || rec == 0 {
            continue;
        }
        let bytes = data.get(name_at..)?;
        let end = bytes.iter().position(|&b| b == 0)?;
        names.push(String::from_utf8_lossy(&bytes[..end]).into_owned());
    }
    Some(names)
}

/// Python's `encodings.normalize_encoding`: runs of other characters than
/// letters, digits and `.` become one `_`, none at either end.
fn normalize_encoding(encoding: &str) -> String {
    let mut out = String::new();
    let mut punct = false;
    for c in encoding.chars() {
        if c.is_alphanumeric() || c == '.' {
            if punct && !out.is_empty() {
                out.push('_');
            }
            if c.is_ascii() {
                out.push(c);
            }
            punct = false;
        } else {
            punct = true;
        }
    }
    out
}

/// Python's `locale._replace_encoding`.
fn replace_encoding(code: &str, encoding: &str) -> String {
    let langname = code.split('.').next().unwrap_or(code);
    let norm = normalize_encoding(encoding);
    let norm = table(ENCODING_ALIAS, &norm.to_lowercase())
        .map(str::to_string)
        .unwrap_or(norm);
    let lower = norm.to_lowercase();
    let enc = table(LOCALE_ENCODING_ALIAS, &lower)
        .or_else(|| table(LOCALE_ENCODING_ALIAS, &lower.replace(['_', '-'], "")))
        .map(str::to_string)
        .unwrap_or(norm);
    format!("{langname}.{enc}")
}

/// Python's `locale._append_modifier`.
fn append_modifier(code: &str, modifier: &str) -> String {
    if modifier == "euro" {
        match code.split_once('.') {
            None => return format!("{code}.ISO8859-15"),
            Some((_, "ISO8859-15" | "UTF-8")) => return code.to_string(),
            Some((_, "ISO8859-1")) => return replace_encoding(code, "ISO8859-15"),
            Some(_) => {}
        }
    }
    format!("{code}@{modifier}")
}

/// Python's `locale.normalize`.
pub(crate) fn normalize(localename: &str) -> String {
    let code = localename.to_lowercase().replace(':', ".");
    let (code, modifier) = code.split_once('@').unwrap_or((&code, ""));
    let mut parts = code.split('.');
    let langname = parts.next().unwrap_or("");
    let encoding = parts.next().unwrap_or("");
    let mut lang_enc = langname.to_string();
    if !encoding.is_empty() {
        lang_enc.push('.');
        lang_enc.push_str(&encoding.replace(['-', '_'], ""));
    }
    let with_mod = |base: &str| {
        if modifier.is_empty() {
            base.to_string()
        } else {
            format!("{base}@{modifier}")
        }
    };
    if let Some(c) = table(LOCALE_ALIAS, &with_mod(&lang_enc)) {
        return c.to_string();
    }
    if !modifier.is_empty()
        && let Some(c) = table(LOCALE_ALIAS, &lang_enc)
    {
        match c.split_once('@') {
            None => return append_modifier(c, modifier),
            Some((_, m)) if m.to_lowercase() == modifier => return c.to_string(),
            Some(_) => {}
        }
    }
    if !encoding.is_empty() {
        if let Some(c) = table(LOCALE_ALIAS, &with_mod(langname)) {
            return match c.split_once('@') {
                None => replace_encoding(c, encoding),
                Some((c, m)) => format!("{}@{m}", replace_encoding(c, encoding)),
            };
        }
        if !modifier.is_empty()
            && let Some(c) = table(LOCALE_ALIAS, langname)
        {
            match c.split_once('@') {
                None => return append_modifier(&replace_encoding(c, encoding), modifier),
                Some((c, m)) if m.to_lowercase() == modifier => {
                    return format!("{}@{m}", replace_encoding(c, encoding));
                }
                Some(_) => {}
            }
        }
    }
    localename.to_string()
}

/// Python's `locale.getlocale()` of a locale name: `(language,
/// encoding)`, `None` where Python raises (Salt then says `unknown`).
pub(crate) fn getlocale(localename: &str) -> Option<(Value, Value)> {
    let code = normalize(localename);
    let code = match code.split_once('@') {
        Some((c, "euro")) if !c.contains('.') => {
            return Some((json!(c), json!("iso-8859-15")));
        }
        Some((c, _)) => c.to_string(),
        None => code,
    };
    if let Some((lang, rest)) = code.split_once('.') {
        let enc = rest.split('.').next().unwrap_or(rest);
        return Some((json!(lang), json!(enc)));
    }
    match code.as_str() {
        "C" => Some((Value::Null, Value::Null)),
        "UTF-8" => Some((Value::Null, json!("UTF-8"))),
        _ => None,
    }
}

/// One time type of a zone: UTC offset in seconds, abbreviation, DST.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Local {
    pub offset: i64,
    pub abbr: String,
    pub dst: bool,
}

/// A day rule of a POSIX `TZ` string (`Jn`, `n`, `Mm.w.d`), with the
/// local time of day it takes effect at.
#[derive(Debug, Clone, PartialEq)]
enum Rule {
    Julian1(i64, i64),
    Julian0(i64, i64),
    Month(i64, i64, i64, i64),
}

/// A POSIX `TZ` string: standard time, and daylight time with its rules.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Posix {
    std: Local,
    dst: Option<(Local, Rule, Rule)>,
}

/// A zone: a TZif file's transitions, types and footer, or a `TZ` rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Zone {
    Tzif {
        transitions: Vec<(i64, usize)>,
        types: Vec<Local>,
        footer: Option<Posix>,
    },
    Rule(Posix),
}

/// Parse a zone name of a POSIX `TZ` string: letters, or `<...>`.
fn tz_name(s: &[u8], i: &mut usize) -> Option<String> {
    if s.get(*i) == Some(&b'<') {
        let end = s[*i..].iter().position(|&b| b == b'>')? + *i;
        let name = String::from_utf8_lossy(&s[*i + 1..end]).into_owned();
        *i = end + 1;
        return Some(name);
    }
    let start = *i;
    while s.get(*i).is_some_and(u8::is_ascii_alphabetic) {
        *i += 1;
    }
    (*i - start >= 3).then(|| String::from_utf8_lossy(&s[start..*i]).into_owned())
}

/// Parse `[+-]hh[:mm[:ss]]` into seconds.
fn tz_time(s: &[u8], i: &mut usize) -> Option<i64> {
    let sign = match s.get(*i) {
        Some(b'-') => {
            *i += 1;
            -1
        }
        Some(b'+') => {
            *i += 1;
            1
        }
        _ => 1,
    };
    let mut total = 0;
    for (n, scale) in [3600, 60, 1].into_iter().enumerate() {
        if n > 0 {
            if s.get(*i) != Some(&b':') {
                break;
            }
            *i += 1;
        }
        let start = *i;
        while s.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        if *i == start {
            return None;
        }
        let v: i64 = std::str::from_utf8(&s[start..*i]).ok()?.parse().ok()?;
        // POSIX allows up to 24 hours, the C library up to a week.
        if v > if n == 0 { 167 } else { 59 } {
            return None;
        }
        total += v * scale;
    }
    Some(sign * total)
}

/// Parse a decimal number of a POSIX `TZ` string.
fn tz_num(s: &[u8], i: &mut usize) -> Option<i64> {
    let start = *i;
    while s.get(*i).is_some_and(u8::is_ascii_digit) {
        *i += 1;
    }
    std::str::from_utf8(&s[start..*i]).ok()?.parse().ok()
}

/// Parse one `,rule[/time]` of a POSIX `TZ` string.
fn tz_rule(s: &[u8], i: &mut usize) -> Option<Rule> {
    let rule = match s.get(*i) {
        Some(b'J') => {
            *i += 1;
            Rule::Julian1(tz_num(s, i)?, 0)
        }
        Some(b'M') => {
            *i += 1;
            let m = tz_num(s, i)?;
            (s.get(*i) == Some(&b'.')).then_some(())?;
            *i += 1;
            let w = tz_num(s, i)?;
            (s.get(*i) == Some(&b'.')).then_some(())?;
            *i += 1;
            let d = tz_num(s, i)?;
            Rule::Month(m, w, d, 0)
        }
        _ => Rule::Julian0(tz_num(s, i)?, 0),
    };
    let time = if s.get(*i) == Some(&b'/') {
        *i += 1;
        tz_time(s, i)?
    } else {
        7200
    };
    let valid = match rule {
        Rule::Julian1(n, _) => (1..=365).contains(&n),
        Rule::Julian0(n, _) => (0..=365).contains(&n),
        Rule::Month(m, w, d, _) => {
            (1..=12).contains(&m) && (1..=5).contains(&w) && (0..=6).contains(&d)
        }
    };
    if !valid {
        return None;
    }
    Some(match rule {
        Rule::Julian1(n, _) => Rule::Julian1(n, time),
        Rule::Julian0(n, _) => Rule::Julian0(n, time),
        Rule::Month(m, w, d, _) => Rule::Month(m, w, d, time),
    })
}

/// Parse a POSIX `TZ` string (`CET-1CEST,M3.5.0,M10.5.0/3`) as the C
/// library does: a standard name whose offset does not parse is UTC
/// under that name; daylight time without rules follows the US rules.
pub(crate) fn parse_posix(tz: &str) -> Option<Posix> {
    let s = tz.as_bytes();
    let mut i = 0;
    let std_name = tz_name(s, &mut i)?;
    let Some(std_off) = tz_time(s, &mut i) else {
        return Some(Posix {
            std: Local {
                offset: 0,
                abbr: std_name,
                dst: false,
            },
            dst: None,
        });
    };
    let std = Local {
        offset: -std_off,
        abbr: std_name,
        dst: false,
    };
    let Some(dst_name) = tz_name(s, &mut i) else {
        return Some(Posix { std, dst: None });
    };
    let dst_off = if matches!(s.get(i), Some(b',') | None) {
        std.offset + 3600
    } else {
        -tz_time(s, &mut i)?
    };
    let (start, end) = if s.get(i) == Some(&b',') {
        i += 1;
        let start = tz_rule(s, &mut i)?;
        (s.get(i) == Some(&b',')).then_some(())?;
        i += 1;
        (start, tz_rule(s, &mut i)?)
    } else {
        (Rule::Month(3, 2, 0, 7200), Rule::Month(11, 1, 0, 7200))
    };
    let dst = Local {
        offset: dst_off,
        abbr: dst_name,
        dst: true,
    };
    Some(Posix {
        std,
        dst: Some((dst, start, end)),
    })
}

/// Days since 1970-01-01 of a civil date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The year of a day count since 1970-01-01.
fn year_of(days: i64) -> i64 {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    yoe + era * 400 + i64::from(m <= 2)
}

/// Whether `y` is a leap year.
fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// The UTC second a rule takes effect in `year`, in local time of
/// `offset`.
fn rule_at(rule: &Rule, year: i64, offset: i64) -> i64 {
    let jan1 = days_from_civil(year, 1, 1);
    let (day, time) = match *rule {
        Rule::Julian1(n, t) => {
            let extra = i64::from(is_leap(year) && n >= 60);
            (jan1 + n - 1 + extra, t)
        }
        Rule::Julian0(n, t) => (jan1 + n, t),
        Rule::Month(m, w, d, t) => {
            let first = days_from_civil(year, m, 1);
            let wday_first = (first + 4).rem_euclid(7);
            let mut day = first + (d - wday_first).rem_euclid(7) + (w - 1) * 7;
            let next = if m == 12 {
                days_from_civil(year + 1, 1, 1)
            } else {
                days_from_civil(year, m + 1, 1)
            };
            while day >= next {
                day -= 7;
            }
            (day, t)
        }
    };
    day * 86_400 + time - offset
}

impl Posix {
    /// The time type in force at UTC second `t`, by the rules.
    fn at(&self, t: i64) -> Local {
        let Some((dst, start, end)) = &self.dst else {
            return self.std.clone();
        };
        let year = year_of((t + self.std.offset).div_euclid(86_400));
        let begins = rule_at(start, year, self.std.offset);
        let ends = rule_at(end, year, dst.offset);
        let in_dst = if begins < ends {
            t >= begins && t < ends
        } else {
            !(t >= ends && t < begins)
        };
        if in_dst {
            dst.clone()
        } else {
            self.std.clone()
        }
    }
}

/// Read a TZif file (RFC 8536): the 64-bit data of version 2 and later,
/// else the 32-bit data, and the footer's `TZ` string.
pub(crate) fn parse_tzif(data: &[u8]) -> Option<Zone> {
    /// The six counts of a TZif header.
    fn header(d: &[u8]) -> Option<[usize; 6]> {
        if d.get(..4)? != b"TZif" {
            return None;
        }
        let mut counts = [0usize; 6];
        for (n, c) in counts.iter_mut().enumerate() {
            let at = 20 + n * 4;
            *c = u32::from_be_bytes(d.get(at..at + 4)?.try_into().ok()?) as usize;
        }
        Some(counts)
    }
    /// The length of a TZif data block with `time`-byte times.
    fn block_len(c: &[usize; 6], time: usize) -> usize {
        let [isutc, isstd, leap, timecnt, typecnt, charcnt] = *c;
        timecnt * time + timecnt + typecnt * 6 + charcnt + leap * (time + 4) + isstd + isutc
    }
    let v1 = header(data)?;
    let version = *data.get(4)?;
    let (d, c, time) = if version >= b'2' {
        let second = 44 + block_len(&v1, 4);
        let rest = data.get(second..)?;
        (rest, header(rest)?, 8)
    } else {
        (data, v1, 4)
    };
    let [_, _, _, timecnt, typecnt, charcnt] = c;
    let mut at = 44;
    let mut times = Vec::with_capacity(timecnt);
    for _ in 0..timecnt {
        let b = d.get(at..at + time)?;
        times.push(if time == 8 {
            i64::from_be_bytes(b.try_into().ok()?)
        } else {
            i64::from(i32::from_be_bytes(b.try_into().ok()?))
        });
        at += time;
    }
    let idx = d.get(at..at + timecnt)?.to_vec();
    at += timecnt;
    let ttinfo = d.get(at..at + typecnt * 6)?.to_vec();
    at += typecnt * 6;
    let chars = d.get(at..at + charcnt)?;
    let mut types = Vec::with_capacity(typecnt);
    for t in ttinfo.chunks(6) {
        let offset = i64::from(i32::from_be_bytes(t[..4].try_into().ok()?));
        let ai = usize::from(t[5]);
        let abbr = chars.get(ai..)?;
        let end = abbr.iter().position(|&b| b == 0).unwrap_or(abbr.len());
        types.push(Local {
            offset,
            abbr: String::from_utf8_lossy(&abbr[..end]).into_owned(),
            dst: t[4] != 0,
        });
    }
    if types.is_empty() {
        return None;
    }
    let footer = if time == 8 {
        let end = 44 + block_len(&c, 8);
        d.get(end..).and_then(|f| {
            let text = std::str::from_utf8(f).ok()?;
            let tz = text.strip_prefix('\n')?.split('\n').next()?;
            parse_posix(tz)
        })
    } else {
        None
    };
    let transitions = times
        .into_iter()
        .zip(idx)
        .filter(|(_, i)| usize::from(*i) < types.len())
        .map(|(t, i)| (t, usize::from(i)))
        .collect();
    Some(Zone::Tzif {
        transitions,
        types,
        footer,
    })
}

impl Zone {
    /// A zone always at UTC under the name `abbr`.
    pub(crate) fn fixed(abbr: &str) -> Self {
        Zone::Rule(Posix {
            std: Local {
                offset: 0,
                abbr: abbr.to_string(),
                dst: false,
            },
            dst: None,
        })
    }

    /// The local time type in force at UTC second `t`.
    pub(crate) fn at(&self, t: i64) -> Local {
        match self {
            Zone::Rule(p) => p.at(t),
            Zone::Tzif {
                transitions,
                types,
                footer,
            } => match transitions.iter().rposition(|(when, _)| *when <= t) {
                None if transitions.is_empty() && footer.is_some() => footer
                    .as_ref()
                    .map(|f| f.at(t))
                    .unwrap_or_else(|| types[0].clone()),
                None => types[0].clone(),
                Some(i) if i + 1 == transitions.len() => match footer {
                    Some(f) => f.at(t),
                    None => types[transitions[i].1].clone(),
                },
                Some(i) => types[transitions[i].1].clone(),
            },
        }
    }
}

/// The `timezone` Salt reports at UTC second `now`: `dateutil`'s
/// `tzlocal().tzname()`, which is Python's `time.tzname` (the zone's
/// names in January and July, standard first) indexed by whether
/// daylight time is in force now.
pub(crate) fn tzname(zone: &Zone, now: i64) -> String {
    const YEAR: i64 = (365 * 24 + 6) * 3600;
    let t0 = now.div_euclid(YEAR) * YEAR;
    let jan = zone.at(t0);
    let jul = zone.at(t0 + YEAR / 2);
    let (janzone, julzone) = (-jan.offset, -jul.offset);
    let names = if janzone < julzone {
        [jul.abbr, jan.abbr]
    } else {
        [jan.abbr, jul.abbr]
    };
    let [std, dst] = names;
    if janzone == julzone {
        return std;
    }
    if zone.at(now).dst { dst } else { std }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_picks_the_locale_as_python_does() {
        let some = |n: &str| n != "xx" && n != "de_AT.UTF-8";
        assert_eq!(ctype_locale(None, None, Some("C.UTF-8"), &some), "C.UTF-8");
        assert_eq!(ctype_locale(None, None, None, &some), "C.UTF-8");
        assert_eq!(ctype_locale(None, None, Some("POSIX"), &some), "C.UTF-8");
        assert_eq!(
            ctype_locale(Some("C"), None, Some("en_US.UTF-8"), &some),
            "C"
        );
        assert_eq!(
            ctype_locale(None, Some("de_DE.utf8"), Some("C"), &some),
            "de_DE.utf8"
        );
        assert_eq!(ctype_locale(Some(""), None, Some("fr_FR"), &some), "fr_FR");
        assert_eq!(ctype_locale(None, None, Some("xx"), &some), "C.UTF-8");
        // A locale the C library lacks: C, coerced only without LC_ALL.
        assert_eq!(
            ctype_locale(None, None, Some("de_AT.UTF-8"), &some),
            "C.UTF-8"
        );
        assert_eq!(ctype_locale(Some("de_AT.UTF-8"), None, None, &some), "C");
    }

    #[test]
    fn locale_names_normalise_as_glibc_looks_them_up() {
        assert_eq!(normalize_codeset("de_DE.UTF-8"), "de_DE.utf8");
        assert_eq!(
            normalize_codeset("de_DE.ISO-8859-15@euro"),
            "de_DE.iso885915@euro"
        );
        assert_eq!(normalize_codeset("ja_JP.eucJP"), "ja_JP.eucjp");
        assert_eq!(normalize_codeset("en_US"), "en_US");
    }

    #[test]
    fn locale_archives_list_their_locales() {
        // Header (magic, serial, name table at 36, 1 used, 2 slots), two
        // slots (one empty), then the name.
        let mut a = Vec::new();
        for w in [0xde02_0109u32, 1, 36, 1, 2, 0, 0, 0, 0] {
            a.extend_from_slice(&w.to_le_bytes());
        }
        for w in [0u32, 0, 0, 7, 60, 99] {
            a.extend_from_slice(&w.to_le_bytes());
        }
        a.extend_from_slice(b"en_US.utf8\0");
        assert_eq!(archive_names(&a), Some(vec!["en_US.utf8".to_string()]));
        assert_eq!(archive_names(b"not an archive"), None);
    }

    #[test]
    fn locales_normalise_as_python_normalises_them() {
        let get = |n: &str| {
            getlocale(n).map(|(l, e)| {
                (
                    l.as_str().map(str::to_string),
                    e.as_str().map(str::to_string),
                )
            })
        };
        let some = |l: &str, e: &str| Some((Some(l.to_string()), Some(e.to_string())));
        assert_eq!(get("C.UTF-8"), some("en_US", "UTF-8"));
        assert_eq!(get("C.utf8"), some("en_US", "UTF-8"));
        assert_eq!(get("C"), Some((None, None)));
        assert_eq!(get("en_US.UTF-8"), some("en_US", "UTF-8"));
        assert_eq!(get("en_US.utf8"), some("en_US", "UTF-8"));
        assert_eq!(get("de_DE"), some("de_DE", "ISO8859-1"));
        assert_eq!(get("de_DE@euro"), some("de_DE", "ISO8859-15"));
        assert_eq!(get("sr_RS@latin"), some("sr_RS", "UTF-8"));
        assert_eq!(get("ja_JP.eucJP"), some("ja_JP", "eucJP"));
        assert_eq!(get("fr_FR.ISO-8859-1"), some("fr_FR", "ISO8859-1"));
        assert_eq!(get("nonsense"), None);
    }

    #[test]
    fn posix_tz_strings_parse() {
        let p = parse_posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap_or_else(|| Posix {
            std: Local {
                offset: 0,
                abbr: String::new(),
                dst: false,
            },
            dst: None,
        });
        // 2026-07-01T00:00:00Z and 2026-01-01T00:00:00Z.
        assert_eq!(p.at(1_782_864_000).abbr, "CEST");
        assert_eq!(p.at(1_767_225_600).abbr, "CET");
        // Last Sunday of March 2026 is the 29th: 01:00 UTC.
        assert_eq!(p.at(1_774_746_000 - 1).abbr, "CET");
        assert_eq!(p.at(1_774_746_000).abbr, "CEST");
        let z = Zone::Rule(parse_posix("<+03>-3").unwrap_or(p.clone()));
        assert_eq!(tzname(&z, 1_782_864_000), "+03");
        let z = Zone::Rule(parse_posix("AEST-10AEDT,M10.1.0,M4.1.0/3").unwrap_or(p.clone()));
        assert_eq!(tzname(&z, 1_795_000_000), "AEDT"); // November
        assert_eq!(tzname(&z, 1_782_864_000), "AEST"); // July
        let z = Zone::Rule(parse_posix("EST5EDT").unwrap_or(p.clone()));
        assert_eq!(tzname(&z, 1_795_000_000), "EST");
        assert_eq!(tzname(&z, 1_782_864_000), "EDT");
        let z = Zone::Rule(parse_posix("Foo/Bar").unwrap_or(p.clone()));
        assert_eq!(tzname(&z, 1_782_864_000), "Foo");
        assert_eq!(parse_posix("12"), None);
    }

    #[test]
    fn tzif_files_read() {
        // A version 2 file with no transitions and a UTC footer, as
        // /usr/share/zoneinfo/Etc/UTC is.
        let mut f = Vec::new();
        for _ in 0..2 {
            f.extend_from_slice(b"TZif2");
            f.extend_from_slice(&[0; 15]);
            for c in [0u32, 0, 0, 0, 1, 4] {
                f.extend_from_slice(&c.to_be_bytes());
            }
            f.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
            f.extend_from_slice(b"UTC\0");
        }
        f.extend_from_slice(b"\nUTC0\n");
        let z = parse_tzif(&f);
        assert!(z.is_some());
        if let Some(z) = z {
            assert_eq!(tzname(&z, 1_782_864_000), "UTC");
        }
        assert_eq!(parse_tzif(b"nope"), None);
    }
}

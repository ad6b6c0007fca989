//! `tgt_type`: how a job's `tgt` is to be read.

use super::*;

/// How `tgt` is to be read: Salt's `tgt_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetType {
    /// Shell-style glob on the minion id (`web*`).
    Glob,
    /// Explicit minion ids (`web1,web2`, or a JSON array).
    List,
    /// Regular expression on the minion id, anchored at the start.
    Pcre,
    /// Glob on a grain (`os:Debian`).
    Grain,
    /// Regular expression on a grain (`os:(Debian|Ubuntu)`).
    GrainPcre,
    /// An address or network against the `ipv4`/`ipv6` grains.
    Ipcidr,
    /// Boolean expression over the other matchers (`web* and G@os:Debian`).
    Compound,
    /// Glob on a pillar key (`role:web`): evaluated by a master, which
    /// alone holds each minion's pillar.
    Pillar,
    /// Regular expression on a pillar key.
    PillarPcre,
}

impl TargetType {
    /// Every type, in the order error messages name them.
    pub const ALL: [Self; 9] = [
        Self::Glob,
        Self::List,
        Self::Pcre,
        Self::Grain,
        Self::GrainPcre,
        Self::Ipcidr,
        Self::Compound,
        Self::Pillar,
        Self::PillarPcre,
    ];

    /// Parse Salt's `tgt_type` names; anything else is an error.
    pub fn parse(s: &str) -> Result<Self, TargetError> {
        Self::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| TargetError::UnknownType(s.to_string()))
    }

    /// Salt's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Glob => "glob",
            Self::List => "list",
            Self::Pcre => "pcre",
            Self::Grain => "grain",
            Self::GrainPcre => "grain_pcre",
            Self::Ipcidr => "ipcidr",
            Self::Compound => "compound",
            Self::Pillar => "pillar",
            Self::PillarPcre => "pillar_pcre",
        }
    }
}

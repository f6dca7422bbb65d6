//! Upgrades while sessions run: every attach carries the attaching binary's version, and a
//! daemon older than the `serve` attaching to it *retires*. It gives up its socket and its lock
//! at once — so the newer `serve` starts a daemon of its own version in the same directory — and
//! keeps running the sessions it has, their servers untouched, until the last of them ends; then
//! it stops its servers and exits. A session running through an upgrade never loses a tool; new
//! sessions get the new version. A daemon newer than the attaching `serve` (an old binary still
//! installed somewhere) takes the session as it is: the attach protocol only ever grows by
//! fields an older reader ignores.

/// What a retiring daemon answers the attach that made it retire: the `serve` connects again
/// and finds no daemon, so it starts its own.
pub const RETIRED: &str =
    "this mcp-reconcile daemon is older than the attaching serve and retires; connect again";

/// The variable that sets the version this binary reports instead of its package version, so
/// one build can play an older and a newer release in the upgrade tests.
pub const VERSION_VAR: &str = "MCP_RECONCILE_TEST_VERSION";

/// This binary's version: the package version, or [`VERSION_VAR`] when set.
pub fn ours() -> String {
    std::env::var(VERSION_VAR)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned())
}

/// Whether version `a` is newer than `b`: their dot-separated leading numbers compared in
/// order (`0.10.0` > `0.9.3`), a pre-release (`1.0.0-rc.1`) older than its release. Anything
/// that does not read as a version is never newer, so garbage cannot make a daemon retire.
pub fn newer(a: &str, b: &str) -> bool {
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

/// `(numbers, is a release)`: a release sorts after its pre-releases.
fn parse(version: &str) -> Option<(Vec<u64>, bool)> {
    let (core, pre) = match version.split_once(['-', '+']) {
        Some((core, rest)) => (
            core,
            !version[core.len()..].starts_with('+') && !rest.is_empty(),
        ),
        None => (version, false),
    };
    let numbers = core
        .split('.')
        .map(|n| n.parse::<u64>().ok())
        .collect::<Option<Vec<u64>>>()?;
    (!numbers.is_empty()).then_some((numbers, !pre))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_their_numbers() {
        assert!(newer("0.10.0", "0.9.3"));
        assert!(newer("1.0.0", "1.0.0-rc.1"));
        assert!(newer("1.0.1", "1.0.0+build"));
        assert!(!newer("1.0.0", "1.0.0"));
        assert!(!newer("1.0.0+other-build", "1.0.0"));
        assert!(!newer("0.9.0", "0.10.0"));
        assert!(!newer("garbage", "0.1.0"));
        assert!(!newer("9.9.9", "garbage"));
        assert!(!newer("", "0.1.0"));
    }
}

//! Claude Code's plugins: arbitrary `installed_plugins.json`, plugin manifest and plugin
//! `.mcp.json` (parts separated by `\n----\n`; `$ROOT` is the plugin's directory), read as the
//! `claude` layout reads them: no panic, the same parse twice, every entry's JSON text a fixed
//! point. The plugin's files are written under `$TMPDIR`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

/// This process's own directory for the plugin's files.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("claude-plugin-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for the plugin");
        dir
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mcp_reconcile::inputs::fuzz::claude_plugin(dir(), data);
});

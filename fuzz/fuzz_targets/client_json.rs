//! Arbitrary text as each JSON (with comments) client file the layouts read — Claude Code's
//! state, `.mcp.json`, managed and settings files, Cursor's, VS Code's, Copilot CLI's server
//! files and config, Gemini CLI's trust and enablement files: no panic, the same parse twice,
//! every entry's JSON text a fixed point.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mcp_reconcile::inputs::fuzz::client_json(data);
});

//! Arbitrary text as a language-server file in each format a layout reads (this host's
//! `.lsp.json`, a Claude Code plugin's, Copilot CLI's `lsp-config.json`), converted and parsed
//! as the session does: no panic, the same conversion twice, every entry's JSON text a fixed
//! point.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mcp_reconcile::inputs::fuzz::lsp_file(data);
});

//! Arbitrary text as Codex's `config.toml` (user, project, administrator) and its
//! `requirements.toml`: no panic, the same parse twice, every entry's JSON text a fixed point.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mcp_reconcile::inputs::fuzz::client_toml(data);
});

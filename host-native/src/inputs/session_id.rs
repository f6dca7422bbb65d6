//! The session id: which running session `status`, `reload`, `reconnect` and `plan` reach.

use std::path::Path;

use super::server_files::ServerJson;
use super::Inputs;

impl Inputs {
    /// A stable id of this session's file set: 16 hex digits of a hash of the
    /// layout, the project root and every input —
    /// settings, `.mcp.json`, approvals, language-server files, each
    /// `--mcp-config` (its path, or the inline JSON). Commands given the same
    /// flags in the same project get the same id; other files, another id.
    pub fn session_id(&self) -> String {
        let mut text = String::new();
        let cli_configs = self.files.cli_configs.iter().map(|file| match &file.kind {
            ServerJson::CliInline(text) => text.as_str().into(),
            _ => file.path.to_string_lossy(),
        });
        let paths = [
            Path::new(self.layout.as_str()),
            Path::new(&self.project_root),
            &self.paths.user,
            &self.paths.workspace,
            &self.paths.system,
            &self.paths.system_defaults,
            &self.paths.mcp_json,
            &self.paths.approvals,
            &self.paths.lsp_json,
            &self.paths.lsp_approvals,
        ]
        .into_iter()
        .chain(self.paths.user_lsp.as_deref())
        .map(Path::to_string_lossy);
        for part in paths.chain(cli_configs) {
            text.push_str(&part);
            text.push('\0');
        }
        format!("{:016x}", fnv1a64(text.as_bytes()))
    }
}

/// FNV-1a, 64 bit: a small hash that is stable across builds and platforms.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_the_reference_hash() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}

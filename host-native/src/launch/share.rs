//! Where a pooled server runs for its sharing scope (issue 41): [`place`] gives the pool key and
//! the launch context its process starts with.
//!
//! * `session`: the key of `project` with the session's own mark hashed in, so no other
//!   session ever holds the process.
//! * `project`: [`Launch::shared_id`] — the sessions that would start it identically.
//! * `user`: the session's launch made neutral ([`Launch::for_user`]): the user's home as the
//!   working directory unless the entry names an absolute `cwd`, and none of the project's
//!   variables — neither counted nor passed. Sessions of different projects and git worktrees
//!   then start it identically, so they share it.
//!
//! A remote connection has no scope (the pool's `pool_remote` decides): its key is as before.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::ServerConfig;
use sha2::{Digest, Sha256};

use super::{Launch, PathIdentities, Share};

/// A server's place in the pool: its key and the launch context its process starts with.
pub struct Placement {
    /// The pool key.
    pub id: ConnectionId,
    /// The directory and environment the process starts with (`None`: this process's).
    pub launch: Option<Arc<Launch>>,
}

/// Where connection `id` of `config` runs for session `session` (a mark unique to one session
/// of the pool) shared in `share` (`None`: a remote connection, no scope); `PATH`'s identity
/// from `paths`.
pub fn place(
    launch: Option<&Arc<Launch>>,
    id: &ConnectionId,
    config: &ServerConfig,
    share: Option<Share>,
    session: &str,
    paths: &mut PathIdentities,
) -> Placement {
    let mut project = |launch: Option<&Arc<Launch>>| match launch {
        Some(launch) => launch.shared_id_in(id, config, paths),
        None => id.clone(),
    };
    match share {
        None | Some(Share::Project) => Placement {
            id: project(launch),
            launch: launch.cloned(),
        },
        Some(Share::Session) => Placement {
            id: own(&project(launch), session),
            launch: launch.cloned(),
        },
        Some(Share::User) => {
            let neutral = launch.and_then(|l| l.for_user().map(Arc::new));
            // Without a home to run in, the process stays in its project.
            let launch = neutral.or_else(|| launch.cloned());
            Placement {
                id: project(launch.as_ref()),
                launch,
            }
        }
    }
}

/// `key` made the session's own: `<name>::<16 hex>` of a hash over `key` and `session`.
fn own(key: &ConnectionId, session: &str) -> ConnectionId {
    let mut hash = Sha256::new();
    for part in [key.as_str(), "session", session] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    let hex: String = hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    ConnectionId(format!("{}::{hex}", key.server_name()))
}

/// Variables named like this name the project a session works in (qwen-code's
/// `QWEN_CODE_PROJECT_DIR` is a directory of its own per project, outside it); a process
/// shared by every project gets none.
pub const PROJECT_DIR_SUFFIX: &str = "_PROJECT_DIR";

impl Launch {
    /// This launch for a process of every project of the user: the home directory (`HOME`,
    /// absolute) as [`Launch::dir`]; without the variables that name the project (a value that
    /// is the project directory or a path inside it, also as an item of a `:` list —
    /// `CLAUDE_PROJECT_DIR`, `PWD` — and every `*_PROJECT_DIR`) and without `PATH` entries
    /// inside the project. `None` without an absolute `HOME`.
    pub fn for_user(&self) -> Option<Launch> {
        let home = self.vars.get("HOME").map(PathBuf::from)?;
        if !home.is_absolute() {
            return None;
        }
        let roots = self.project_roots();
        let inside = |item: &str| {
            let path = Path::new(item);
            path.is_absolute() && roots.iter().any(|root| path.starts_with(root))
        };
        let vars = self
            .vars
            .iter()
            .filter_map(|(key, value)| {
                if key == "PATH" {
                    let kept: Vec<&str> = value.split(':').filter(|e| !inside(e)).collect();
                    return Some((key.clone(), kept.join(":")));
                }
                let named = key.ends_with(PROJECT_DIR_SUFFIX) || value.split(':').any(inside);
                (!named).then(|| (key.clone(), value.clone()))
            })
            .collect();
        Some(Launch {
            dir: home,
            vars,
            raw: self.raw.clone(),
            tokens: self.tokens.clone(),
        })
    }

    /// The project directory as given and as the file system resolves it (links followed).
    fn project_roots(&self) -> Vec<PathBuf> {
        let mut roots = vec![self.dir.clone()];
        if let Ok(real) = std::fs::canonicalize(&self.dir) {
            if real != self.dir {
                roots.push(real);
            }
        }
        roots.retain(|root| root.parent().is_some());
        roots
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn launch(dir: &str, vars: &[(&str, &str)]) -> Arc<Launch> {
        Arc::new(Launch {
            dir: PathBuf::from(dir),
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
            raw: Vec::new(),
            tokens: None,
        })
    }

    fn config(json: &str) -> ServerConfig {
        ServerConfig::from_json(json).expect("config")
    }

    fn key(l: &Arc<Launch>, cfg: &ServerConfig, share: Share, session: &str) -> ConnectionId {
        let id = ConnectionId("m::0123456789abcdef".into());
        place(
            Some(l),
            &id,
            cfg,
            Some(share),
            session,
            &mut PathIdentities::default(),
        )
        .id
    }

    #[test]
    fn a_session_scope_gives_every_session_its_own_process() {
        let cfg = config(r#"{"command":"x"}"#);
        let one = launch("/p", &[("PATH", "/bin"), ("HOME", "/home/u")]);
        let a = key(&one, &cfg, Share::Session, "s1");
        assert_ne!(a, key(&one, &cfg, Share::Session, "s2"));
        assert_eq!(a, key(&one, &cfg, Share::Session, "s1"));
        assert!(a.as_str().starts_with("m::"), "{a}");
        assert_eq!(
            key(&one, &cfg, Share::Project, "s1"),
            key(&one, &cfg, Share::Project, "s2")
        );
    }

    #[test]
    fn a_user_scope_runs_in_the_home_without_the_projects_variables() {
        let cfg = config(r#"{"command":"x"}"#);
        let session = |dir: &str, session: &str| {
            launch(
                dir,
                &[
                    ("HOME", "/home/u"),
                    ("PATH", &format!("{dir}/node_modules/.bin:/usr/bin")),
                    ("CLAUDE_PROJECT_DIR", dir),
                    ("PWD", &format!("{dir}/sub")),
                    ("PYTHONPATH", &format!("/opt/lib:{dir}/src")),
                    ("QWEN_CODE_PROJECT_DIR", "/home/u/.qwen/projects/x"),
                    ("CLAUDE_CODE_SESSION_ID", session),
                    ("TOKEN", "t"),
                ],
            )
        };
        let (one, two) = (session("/work/a", "1"), session("/work/b-tree", "2"));
        assert_eq!(
            key(&one, &cfg, Share::User, "s1"),
            key(&two, &cfg, Share::User, "s2")
        );
        assert_ne!(
            key(&one, &cfg, Share::Project, "s1"),
            key(&two, &cfg, Share::Project, "s2")
        );
        let neutral = one.for_user().expect("a home");
        assert_eq!(neutral.dir, Path::new("/home/u"));
        assert_eq!(neutral.effective_cwd(&cfg), Path::new("/home/u"));
        let names: Vec<&str> = neutral.vars.keys().map(String::as_str).collect();
        assert_eq!(names, ["CLAUDE_CODE_SESSION_ID", "HOME", "PATH", "TOKEN"]);
        assert_eq!(neutral.vars["PATH"], "/usr/bin");
        // Another token is still another process.
        let other = launch("/work/a", &[("HOME", "/home/u"), ("TOKEN", "u")]);
        let same = launch("/work/b", &[("HOME", "/home/u"), ("TOKEN", "t")]);
        assert_ne!(
            key(&other, &cfg, Share::User, "s"),
            key(&same, &cfg, Share::User, "s")
        );
        // An absolute `cwd` is kept.
        let fixed = config(r#"{"command":"x","cwd":"/srv"}"#);
        assert_eq!(neutral.effective_cwd(&fixed), Path::new("/srv"));
    }

    #[test]
    fn without_a_home_a_user_scope_stays_in_the_project() {
        let cfg = config(r#"{"command":"x"}"#);
        let homeless = launch("/work/a", &[("PATH", "/bin")]);
        assert!(homeless.for_user().is_none());
        assert_eq!(
            key(&homeless, &cfg, Share::User, "s"),
            key(&homeless, &cfg, Share::Project, "s")
        );
    }
}

//! Lazy servers (issue 41): a server that is not started until a request needs it.
//!
//! A lazy server's catalog comes from its last listing (the host keeps it, keyed by connection
//! id); it is started when a call is routed to it, and stopped again once it has served
//! nothing for the idle time. A lazy server with no listing yet is started once to learn it.
//!
//! An entry asks with `"lazy": true` (or opts out of a global default with `false`); the
//! settings give a default with `mcp.lazy` and the idle time with `mcp.lazyIdleMs`. Every
//! settings scope may set them, the workspace's (the repository's) included: lazy only ever
//! *delays* a start the plan already admitted, so it cannot make anything run that the user
//! did not approve — at most a repository makes an approved server start later, or (with a
//! short idle time) stop and start again, never one that was not admitted. `lazy` is not part
//! of the connection id (like `share`); it is part of the approval hash, as every field of an
//! entry is.
//!
//! [`decide`] is the one decision: from what the host knows of one lazy server (a cached
//! listing, whether it runs, whether a call waits for it, its calls in flight, when it was
//! last used) and the time now — stay dormant, start, keep (and when to look again), or stop.

use crate::config::ServerConfig;
use crate::json::Value;
use crate::scopes::mcp_member;
use crate::sources::LayerSource;
use crate::time::Millis;

/// How long a running lazy server may serve nothing before it is stopped, unless
/// `mcp.lazyIdleMs` says otherwise: five minutes.
pub const DEFAULT_IDLE: Millis = Millis(300_000);

/// The shortest idle time a setting can ask for: below it a server would be stopped between
/// the calls of one turn of an agent.
pub const MIN_IDLE: Millis = Millis(200);

/// The longest idle time a setting can ask for: a day.
pub const MAX_IDLE: Millis = Millis(86_400_000);

/// `mcp.lazy` and `mcp.lazyIdleMs` over the settings scopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LazySettings {
    /// Whether entries without their own `lazy` are lazy (default `false`).
    pub default: bool,
    /// How long a running lazy server may be idle before it is stopped.
    pub idle: Millis,
}

impl Default for LazySettings {
    fn default() -> Self {
        LazySettings {
            default: false,
            idle: DEFAULT_IDLE,
        }
    }
}

/// Reads `mcp.lazy` (a boolean) and `mcp.lazyIdleMs` (a number of milliseconds, clamped to
/// [`MIN_IDLE`]..=[`MAX_IDLE`]) from the settings scopes (parsed settings objects tagged with
/// their layer kind, in any order): each from the highest-precedence scope that writes a valid
/// value. A value of another type is ignored.
pub fn lazy_settings(scopes: &[(LayerSource, &Value)]) -> LazySettings {
    let mut ordered: Vec<&(LayerSource, &Value)> = scopes.iter().collect();
    // Highest precedence first.
    ordered.sort_by_key(|(source, _)| std::cmp::Reverse(*source));
    let members = |key: &'static str| {
        ordered
            .iter()
            .filter_map(move |(_, settings)| mcp_member(settings, key))
    };
    let default = members("lazy").find_map(Value::as_bool).unwrap_or(false);
    let idle = members("lazyIdleMs")
        .find_map(|v| v.as_f64().and_then(idle_of))
        .unwrap_or(DEFAULT_IDLE);
    LazySettings { default, idle }
}

/// A setting's idle time: a finite number of milliseconds, clamped; `None` for NaN or infinity.
fn idle_of(ms: f64) -> Option<Millis> {
    if !ms.is_finite() {
        return None;
    }
    let clamped = ms.clamp(MIN_IDLE.0 as f64, MAX_IDLE.0 as f64);
    // In range by the clamp: the cast neither wraps nor saturates.
    Some(Millis(clamped as u64))
}

/// Whether `config` is lazy: its own `lazy` when it is a boolean, else the settings' default.
pub fn effective_lazy(config: &ServerConfig, settings: &LazySettings) -> bool {
    match config.get("lazy") {
        Some(Value::Bool(own)) => *own,
        _ => settings.default,
    }
}

/// What the host knows of one lazy server when it asks [`decide`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LazyView {
    /// A listing of its current connection id is kept.
    pub cached: bool,
    /// A connection of it exists (starting, serving or failing).
    pub running: bool,
    /// Its connection is still starting.
    pub starting: bool,
    /// A request routed to it waits for it to start.
    pub waiting: bool,
    /// Requests forwarded to it and not answered yet.
    pub in_flight: usize,
    /// When it last started or served a request (meaningful while it runs).
    pub last_used: Millis,
}

/// What to do with one lazy server now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LazyStep {
    /// Not running, and nothing needs it: offer its cached listing, start nothing.
    Dormant,
    /// Start it: a request waits for it, or there is no listing to offer yet.
    Start,
    /// Leave it running; look again at `check_at` (`None`: when something about it changes —
    /// its start ends).
    Keep {
        /// When it may have been idle long enough.
        check_at: Option<Millis>,
    },
    /// It served nothing for the idle time: stop it (its listing stays offered).
    Stop,
}

/// The decision for one lazy server at `now` with idle time `idle` (see [`LazyStep`]).
pub fn decide(view: &LazyView, idle: Millis, now: Millis) -> LazyStep {
    if !view.running {
        return if view.waiting || !view.cached {
            LazyStep::Start
        } else {
            LazyStep::Dormant
        };
    }
    if view.starting {
        return LazyStep::Keep { check_at: None };
    }
    if view.waiting || view.in_flight > 0 {
        // Busy: it cannot have been idle for the idle time before now.
        return LazyStep::Keep {
            check_at: Some(now.saturating_add(idle.0)),
        };
    }
    let due = view.last_used.saturating_add(idle.0);
    if due <= now {
        LazyStep::Stop
    } else {
        LazyStep::Keep {
            check_at: Some(due),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn settings(scopes: &[(LayerSource, &str)]) -> LazySettings {
        let values: Vec<(LayerSource, Value)> = scopes
            .iter()
            .map(|(source, text)| (*source, parse(text).expect("json")))
            .collect();
        let refs: Vec<(LayerSource, &Value)> = values.iter().map(|(s, v)| (*s, v)).collect();
        lazy_settings(&refs)
    }

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("config")
    }

    /// Guards the opt-in: nothing is lazy unless a setting or the entry says so.
    #[test]
    fn nothing_is_lazy_by_default() {
        let none = settings(&[]);
        assert_eq!(none, LazySettings::default());
        assert!(!effective_lazy(&cfg(r#"{"command":"x"}"#), &none));
        assert!(effective_lazy(
            &cfg(r#"{"command":"x","lazy":true}"#),
            &none
        ));
        // Not a boolean: no opinion.
        assert!(!effective_lazy(
            &cfg(r#"{"command":"x","lazy":"yes"}"#),
            &none
        ));
    }

    /// Guards the keys: the highest scope with a valid value wins, an entry opts out.
    #[test]
    fn the_highest_scope_sets_the_default_and_an_entry_opts_out() {
        let s = settings(&[
            (
                LayerSource::User,
                r#"{"mcp":{"lazy":true,"lazyIdleMs":1000}}"#,
            ),
            (LayerSource::SystemDefaults, r#"{"mcp":{"lazy":false}}"#),
            (
                LayerSource::System,
                r#"{"mcp":{"lazy":"no","lazyIdleMs":"5"}}"#,
            ),
        ]);
        assert!(s.default);
        assert_eq!(s.idle, Millis(1000));
        assert!(!effective_lazy(&cfg(r#"{"command":"x","lazy":false}"#), &s));
        assert!(effective_lazy(&cfg(r#"{"command":"x"}"#), &s));
        let ws = settings(&[
            (LayerSource::User, r#"{"mcp":{"lazy":false}}"#),
            (LayerSource::Workspace, r#"{"mcp":{"lazy":true}}"#),
        ]);
        assert!(ws.default, "a workspace may only delay starts");
    }

    /// Guards the clamp: nonsense idle times land in range, non-numbers are ignored.
    #[test]
    fn an_idle_time_is_clamped() {
        let idle = |text: &str| settings(&[(LayerSource::User, text)]).idle;
        assert_eq!(idle(r#"{"mcp":{"lazyIdleMs":0}}"#), MIN_IDLE);
        assert_eq!(idle(r#"{"mcp":{"lazyIdleMs":-5}}"#), MIN_IDLE);
        assert_eq!(idle(r#"{"mcp":{"lazyIdleMs":1e300}}"#), MAX_IDLE);
        assert_eq!(idle(r#"{"mcp":{"lazyIdleMs":2500.7}}"#), Millis(2500));
        assert_eq!(idle(r#"{"mcp":{"lazyIdleMs":null}}"#), DEFAULT_IDLE);
        assert_eq!(idle(r#"{"mcp":[]}"#), DEFAULT_IDLE);
    }

    /// Guards the decision table.
    #[test]
    fn each_state_of_a_lazy_server_gets_its_step() {
        let idle = Millis(1000);
        let now = Millis(10_000);
        let base = LazyView {
            cached: true,
            last_used: Millis(9_500),
            ..LazyView::default()
        };
        let cases: &[(LazyView, LazyStep)] = &[
            // Dormant with a listing: nothing starts.
            (base, LazyStep::Dormant),
            // No listing yet: started once to learn it.
            (
                LazyView {
                    cached: false,
                    ..base
                },
                LazyStep::Start,
            ),
            // A call waits for a dormant server.
            (
                LazyView {
                    waiting: true,
                    ..base
                },
                LazyStep::Start,
            ),
            // Starting: its start's end decides again.
            (
                LazyView {
                    running: true,
                    starting: true,
                    last_used: Millis(0),
                    ..base
                },
                LazyStep::Keep { check_at: None },
            ),
            // Used recently: kept until its idle time is up.
            (
                LazyView {
                    running: true,
                    ..base
                },
                LazyStep::Keep {
                    check_at: Some(Millis(10_500)),
                },
            ),
            // Idle for exactly the idle time: stopped.
            (
                LazyView {
                    running: true,
                    last_used: Millis(9_000),
                    ..base
                },
                LazyStep::Stop,
            ),
            // A call in flight keeps it however long ago it was last started.
            (
                LazyView {
                    running: true,
                    in_flight: 1,
                    last_used: Millis(0),
                    ..base
                },
                LazyStep::Keep {
                    check_at: Some(Millis(11_000)),
                },
            ),
            // Running without a listing (learning it), idle: stopped too.
            (
                LazyView {
                    running: true,
                    cached: false,
                    last_used: Millis(0),
                    ..base
                },
                LazyStep::Stop,
            ),
        ];
        for (view, step) in cases {
            assert_eq!(decide(view, idle, now), *step, "{view:?}");
        }
        // Time near the end of the range never overflows.
        let late = LazyView {
            running: true,
            last_used: Millis(u64::MAX - 1),
            ..base
        };
        assert_eq!(
            decide(&late, idle, Millis(u64::MAX - 1)),
            LazyStep::Keep {
                check_at: Some(Millis(u64::MAX))
            }
        );
    }

    /// Guards the identity rule: `lazy` never changes the connection id, but is approved.
    #[test]
    fn lazy_is_not_part_of_the_connection_id_but_of_the_approval_hash() {
        use crate::identity::{approval_hash, connection_id};
        let eager = cfg(r#"{"command":"x"}"#);
        let lazy = cfg(r#"{"command":"x","lazy":true}"#);
        assert_eq!(connection_id("a", &eager), connection_id("a", &lazy));
        assert_ne!(approval_hash(&eager), approval_hash(&lazy));
    }
}

//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) through `serve`: a server
//! decides whether a `tools/call` becomes a task; its `CreateTaskResult` passes through to the
//! client, and the client's `tasks/get`, `tasks/update` and `tasks/cancel` for that task go to
//! the server that owns it, with the client's own `_meta`. The gateway runs no task itself.
//!
//! The owners are remembered per task id, at most [`MAX_TASKS`] (the oldest is forgotten
//! first); a task id the gateway did not hand out is `-32602`, as the extension says for an
//! unknown task. A task lives on its server's connection: when that server is restarted (an
//! edit, a crash) its tasks end with it, and asking about one says so.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
    GetTaskResult, ServerResult, UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::ErrorData;

use crate::transport::{CallError, Caller};

/// Most tasks whose owner the gateway remembers.
pub const MAX_TASKS: usize = 1024;

/// Which server owns each task a client was handed, oldest first.
#[derive(Default)]
pub struct TaskOwners(Mutex<VecDeque<(String, Caller)>>);

impl std::fmt::Debug for TaskOwners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskOwners").finish_non_exhaustive()
    }
}

impl TaskOwners {
    /// `caller`'s server owns the task `task_id`.
    pub fn owned(&self, task_id: &str, caller: Caller) {
        let mut owners = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        owners.retain(|(id, _)| id != task_id);
        if owners.len() >= MAX_TASKS {
            owners.pop_front();
        }
        owners.push_back((task_id.to_owned(), caller));
    }

    fn owner(&self, task_id: &str) -> Result<Caller, ErrorData> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(id, _)| id == task_id)
            .map(|(_, caller)| caller.clone())
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("no task `{task_id}` is known here"), None)
            })
    }

    /// `tasks/get`, from the task's server.
    pub async fn get(&self, params: GetTaskParams) -> Result<GetTaskResult, ErrorData> {
        let caller = self.owner(&params.task_id)?;
        let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(params));
        match answer(caller.forward("tasks/get", request).await)? {
            ServerResult::GetTaskResult(result) => Ok(result),
            _ => Err(unexpected("tasks/get")),
        }
    }

    /// `tasks/update`, to the task's server.
    pub async fn update(&self, params: UpdateTaskParams) -> Result<(), ErrorData> {
        let caller = self.owner(&params.task_id)?;
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(params));
        answer(caller.forward("tasks/update", request).await).map(drop)
    }

    /// `tasks/cancel`, to the task's server.
    pub async fn cancel(&self, params: CancelTaskParams) -> Result<(), ErrorData> {
        let caller = self.owner(&params.task_id)?;
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(params));
        answer(caller.forward("tasks/cancel", request).await).map(drop)
    }
}

fn answer(result: Result<ServerResult, CallError>) -> Result<ServerResult, ErrorData> {
    match result {
        Ok(result) => Ok(result),
        Err(CallError::Mcp(error)) => Err(error),
        Err(CallError::Failed(error)) => Err(ErrorData::internal_error(error.message, None)),
    }
}

fn unexpected(what: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("the task's server answered {what} with something else"),
        None,
    )
}

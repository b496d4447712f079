//! The in-page assistant loop: the conversation and the projected tools go to a model
//! client; the tool calls it returns go through the executor; their results go back,
//! until the model answers in text or the step cap is hit.

mod client;
mod fallback;
mod openai;
mod scripted;
mod stream;

#[cfg(test)]
mod history_tests;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use countersign::Call;

pub use crate::conversation::{ChatMessage, ModelError, ModelRequest, ModelTurn, Role, ToolCall};
pub use crate::conversation::{Preparing, Streaming};
pub use client::ModelClient;
pub use fallback::{Fallback, FallbackSwitch};
pub use openai::{
    parse_completion, parse_error, parse_error_with, OpenAiCompatible, DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MODEL_TIMEOUT_MS, DEFAULT_RETRY_AFTER_S,
};
pub use scripted::{PhraseError, Reply, Rule, Scripted};

use crate::countersign::Countersign;
use crate::dock_state::LogEntry;
use crate::i18n::Locale;

/// How many model round trips one message may take unless configured otherwise.
pub const DEFAULT_MAX_STEPS: usize = 8;

/// Why a turn ended without an answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssistantError {
    /// A turn is already running.
    #[error("the assistant is still working on the last message")]
    Busy,
    /// The message was empty.
    #[error("the message is empty")]
    Empty,
    /// The model client failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model kept calling tools past the step cap.
    #[error("the assistant reached its step limit of {0}")]
    StepLimit(usize),
}

struct Inner {
    client: Box<dyn ModelClient>,
    history: RefCell<Vec<ChatMessage>>,
    max_steps: usize,
    busy: Cell<bool>,
    /// The way back from the offline assistant to the model, when there is one.
    switch: RefCell<Option<FallbackSwitch>>,
}

/// The most tool calls of one model turn that reach the gate; the rest are answered as
/// not run (a model cannot keep the person busy with hundreds of cards).
pub const MAX_CALLS_PER_TURN: usize = 16;

/// How many times a rate-limited or failing model request is tried again.
const MAX_RETRIES: u32 = 2;
/// The first wait before trying a failing model again (doubled each time).
const RETRY_BACKOFF_MS: u32 = 500;
/// The longest `Retry-After` the assistant waits for before giving up.
const MAX_RETRY_AFTER_S: u32 = 60;

/// The assistant behind the dock's chat. Cheap to clone.
#[derive(Clone)]
pub struct Assistant(Rc<Inner>);

impl std::fmt::Debug for Assistant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assistant")
            .field("offline", &self.0.client.is_offline())
            .field("max_steps", &self.0.max_steps)
            .finish_non_exhaustive()
    }
}

impl Assistant {
    /// An assistant answering with `client`, at most [`DEFAULT_MAX_STEPS`] round trips a message.
    pub fn new(client: impl ModelClient + 'static) -> Self {
        Self::with_max_steps(client, DEFAULT_MAX_STEPS)
    }

    /// An assistant with a step cap of `max_steps` (at least 1).
    pub fn with_max_steps(client: impl ModelClient + 'static, max_steps: usize) -> Self {
        Self(Rc::new(Inner {
            client: Box::new(client),
            history: RefCell::default(),
            max_steps: max_steps.max(1),
            busy: Cell::new(false),
            switch: RefCell::default(),
        }))
    }

    /// The assistant most pages want, in one call: the model behind the gateway at this
    /// origin when its `/v1/health` says it has one, the offline `planner` otherwise
    /// (also when the gateway goes away mid-session). With a gateway there, the audit
    /// trail ships to it (`/v1/audit`). The dock's badge follows whichever answers. A
    /// gateway that *refuses* the page (a wrong origin, a missing token) is shown in the
    /// chat with the flag that fixes it, never hidden behind the offline assistant.
    ///
    /// ```no_run
    /// # use countersign_leptos::{Assistant, Locale, Rule, Scripted};
    /// # fn app(cs: &countersign_leptos::Countersign) {
    /// let offline = Scripted::new(Locale::En, vec![
    ///     Rule::new("add_todo", serde_json::json!({ "text": "{text}" })).phrase("add {text}"),
    /// ])
    /// .expect("phrases it can match");
    /// let assistant = Assistant::for_page(cs, offline);
    /// # }
    /// ```
    pub fn for_page(cs: &Countersign, planner: impl ModelClient + 'static) -> Self {
        let fallback = Fallback::new(OpenAiCompatible::default(), planner, true);
        let switch = fallback.switch();
        let assistant = Self::new(fallback);
        *assistant.0.switch.borrow_mut() = Some(switch.clone());
        assistant.resume(cs);
        cs.set_offline(true);
        let cs = cs.clone();
        leptos::task::spawn_local(async move {
            if let Some(has_model) = OpenAiCompatible::default().health().await {
                cs.ship_audit("/v1/audit");
                if has_model {
                    switch.set_online(true);
                    cs.set_offline(false);
                }
            }
        });
        assistant
    }

    /// Picks the conversation up where an earlier load of this tab left it, when the page
    /// keeps pending calls ([`crate::CountersignOptions::keep_pending`]): the history
    /// comes back into the chat, and a turn that was waiting on the person goes on once
    /// the calls it made have settled here (brought back and decided again, or reported
    /// to the model as not done). [`Assistant::for_page`] does it.
    pub fn resume(&self, cs: &Countersign) {
        let Some(history) = crate::restore::saved_history(cs).filter(|h| valid_history(h)) else {
            return;
        };
        for message in &history {
            match (message.role, &message.content) {
                (Role::User, Some(text)) => cs.push_log(LogEntry::User(text.clone())),
                (Role::Assistant, Some(text)) if !text.trim().is_empty() => {
                    cs.push_log(LogEntry::Assistant(text.clone()))
                }
                _ => {}
            }
        }
        let open = unanswered(&history);
        *self.0.history.borrow_mut() = history;
        if open.is_empty() {
            return;
        }
        self.0.busy.set(true);
        cs.set_working(true);
        let (this, cs) = (self.clone(), cs.clone());
        leptos::task::spawn_local(async move {
            let restored = match crate::restore::take_restored(&cs) {
                Some(rx) => rx.await.unwrap_or_default(),
                None => Vec::new(),
            };
            for call in open {
                // A call that ended before the reload: what really happened to it.
                let content = crate::restore::saved_result(&cs, &call.id).unwrap_or_else(|| {
                    restored
                        .iter()
                        .find(|s| *s.tool_call_id == *call.id)
                        .cloned()
                        .or_else(|| not_waiting(&cs, &call))
                        .map_or_else(String::new, |s| s.to_model_content())
                });
                this.0
                    .history
                    .borrow_mut()
                    .push(ChatMessage::tool(call.id.clone(), content));
            }
            // What the model read before the reload is still in front of it: the gate
            // hears it again, until the person speaks.
            for source in untrusted_read(&this.0.history.borrow()) {
                let _ = cs.executor().read_untrusted(&source);
            }
            crate::restore::save_history(&cs, &this.0.history.borrow());
            let mut ran = Vec::new();
            let result = this.turn(&cs, &mut ran).await;
            this.finish(&cs, &result, &ran);
        });
    }

    /// Whether the person can ask for the model again while the offline assistant answers
    /// ([`Assistant::for_page`] keeps the way back).
    pub fn can_go_online(&self) -> bool {
        self.0.switch.borrow().is_some()
    }

    /// The person asks for the model again: the gateway is asked whether it has one; if
    /// so the model answers from the next message on, else the dock says it is still
    /// away. The offline assistant is a state the person can always try to leave.
    pub async fn try_model_again(&self, cs: &Countersign) -> bool {
        let Some(switch) = self.0.switch.borrow().clone() else {
            return false;
        };
        let strings = cs.locale().strings();
        let back = OpenAiCompatible::default().health().await == Some(true);
        switch.set_online(back);
        cs.set_offline(!back);
        let notice = if back {
            strings.model_back
        } else {
            strings.model_still_away
        };
        cs.push_log(LogEntry::Notice(notice.to_owned()));
        back
    }

    /// Whether the offline assistant is in use.
    pub fn is_offline(&self) -> bool {
        self.0.client.is_offline()
    }

    /// The conversation so far (without the system message).
    pub fn history(&self) -> Vec<ChatMessage> {
        self.0.history.borrow().clone()
    }

    /// Sends the person's message and runs the turn to its end. The dock's log shows
    /// the message, each action's outcome and the answer (or the error).
    pub async fn send(&self, cs: &Countersign, text: &str) -> Result<String, AssistantError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(AssistantError::Empty);
        }
        if self.0.busy.replace(true) {
            return Err(AssistantError::Busy);
        }
        cs.set_working(true);
        cs.set_offline(self.is_offline());
        cs.push_log(LogEntry::User(text.to_owned()));
        // The person's own words: untrusted content read before them raises nothing now.
        let _ = cs.executor().person_spoke();
        {
            let mut history = self.0.history.borrow_mut();
            window(&mut history);
            history.push(ChatMessage::text(Role::User, text));
        }
        crate::restore::save_history(cs, &self.0.history.borrow());
        let mut ran = Vec::new();
        let result = self.turn(cs, &mut ran).await;
        self.finish(cs, &result, &ran);
        result
    }

    /// A turn ended: show its answer or error (in words, with what to do, and what the
    /// turn did run before it: `ran`, the titles of its actions that were done), and
    /// free the assistant.
    fn finish(&self, cs: &Countersign, result: &Result<String, AssistantError>, ran: &[String]) {
        let strings = cs.locale().strings();
        let error = match result {
            Ok(answer) if answer.trim().is_empty() => {
                cs.push_log(LogEntry::Notice(strings.empty_answer.to_owned()));
                None
            }
            Ok(answer) => {
                cs.push_log(LogEntry::Assistant(answer.clone()));
                None
            }
            Err(AssistantError::StepLimit(_)) => Some(strings.step_limit.to_owned()),
            Err(AssistantError::Model(e)) => Some(strings.model_error(e)),
            Err(e) => Some(e.to_string()),
        };
        if let Some(error) = error {
            cs.push_log(LogEntry::Error(format!(
                "{error} {}",
                strings.ran_in_turn(ran)
            )));
        }
        crate::restore::save_history(cs, &self.0.history.borrow());
        cs.set_working(false);
        // A fallback client may have switched to the offline assistant during the turn.
        cs.set_offline(self.is_offline());
        self.0.busy.set(false);
    }

    async fn turn(
        &self,
        cs: &Countersign,
        ran: &mut Vec<String>,
    ) -> Result<String, AssistantError> {
        for _ in 0..self.0.max_steps {
            let tools = cs.executor().projection();
            self.fit(cs, &tools);
            let mut messages = vec![system_message(cs)];
            messages.extend(self.0.history.borrow().iter().cloned());
            let trace = crate::clock::new_traceparent();
            let request = ModelRequest {
                messages,
                tools,
                trace: trace.clone(),
            };
            match self.ask(cs, request).await? {
                ModelTurn::Text(answer) => {
                    self.0
                        .history
                        .borrow_mut()
                        .push(ChatMessage::text(Role::Assistant, answer.clone()));
                    return Ok(answer);
                }
                ModelTurn::ToolCalls { text, calls } => {
                    // The history keeps what the model may see again: never a refused
                    // call's oversized raw arguments (they would be sent back on every
                    // later turn), only a placeholder naming their size.
                    let cap = cs.executor().max_argument_bytes();
                    let kept_calls: Vec<ToolCall> = calls.iter().map(|c| kept(c, cap)).collect();
                    self.0.history.borrow_mut().push(ChatMessage {
                        role: Role::Assistant,
                        content: text.clone(),
                        tool_calls: kept_calls.clone(),
                        tool_call_id: None,
                    });
                    // Saved before the calls reach the gate: after a reload the turn is
                    // picked up from here.
                    crate::restore::save_history(cs, &self.0.history.borrow());
                    if let Some(text) = text.filter(|t| !t.trim().is_empty()) {
                        cs.push_log(LogEntry::Assistant(text));
                    }
                    // One batch per turn: each item decided on its own, every result
                    // back in call order once all have settled. Calls past the cap are
                    // refused unread, each with its record in the trail.
                    let mut calls: Vec<Call> = calls
                        .iter()
                        .map(|c| {
                            let call = Call::new(c.id.clone(), c.name.clone(), c.arguments.clone());
                            match &trace {
                                Some(traceparent) => call.traced(traceparent),
                                None => call,
                            }
                        })
                        .collect();
                    let over = calls.split_off(calls.len().min(MAX_CALLS_PER_TURN));
                    let mut results = cs.call_batch(calls).await;
                    for call in over {
                        results.push(cs.refuse_over_cap(call, MAX_CALLS_PER_TURN).await);
                    }
                    ran.extend(
                        results
                            .iter()
                            .filter(|s| matches!(s.outcome, countersign::Outcome::Done(_)))
                            .map(|s| cs.title_of(&s.action)),
                    );
                    {
                        let mut history = self.0.history.borrow_mut();
                        // The results answer the calls as the history keeps them.
                        for (call, settled) in kept_calls.iter().zip(results) {
                            history.push(ChatMessage::tool(
                                call.id.clone(),
                                settled.to_model_content(),
                            ));
                        }
                    }
                    crate::restore::save_history(cs, &self.0.history.borrow());
                }
            }
        }
        Err(AssistantError::StepLimit(self.0.max_steps))
    }
}

/// A tool call as the history keeps it: arguments over `cap` bytes (which the gate
/// refuses unread) are replaced by a placeholder that names their size.
fn kept(call: &ToolCall, cap: usize) -> ToolCall {
    // Parsers refuse longer ids and names; cut here too so nothing can carry megabytes.
    let short = |text: &str| -> String { text.chars().take(stream::MAX_CALL_ID_BYTES).collect() };
    let arguments = if call.arguments.len() <= cap {
        call.arguments.clone()
    } else {
        serde_json::json!({
            "omitted": format!(
                "{} bytes of arguments, over the limit of {cap}; refused unread",
                call.arguments.len()
            )
        })
        .to_string()
    };
    ToolCall {
        id: short(&call.id),
        name: short(&call.name),
        arguments,
    }
}

/// The most a restored conversation may hold.
const MAX_RESTORED_MESSAGES: usize = 400;

/// The most messages kept from earlier turns when a new one begins: a long session's
/// conversation (what is sent to the model each step, and stored for a reload) stays
/// bounded across turns. One turn can add more on top (each step's calls, each with
/// its result, over-the-cap calls included); a turn too long to restore after a reload
/// is not restored ([`MAX_RESTORED_MESSAGES`]).
const MAX_HISTORY_MESSAGES: usize = 200;

/// Lets go of the oldest turns so at most [`MAX_HISTORY_MESSAGES`] remain, cutting
/// where a person's message begins: no tool result is kept without the call it answers.
/// When the last turn alone is longer, that whole turn is kept (its refusals are what
/// the model must not retry blindly).
fn window(history: &mut Vec<ChatMessage>) {
    let Some(earliest) = history.len().checked_sub(MAX_HISTORY_MESSAGES) else {
        return;
    };
    let is_person = |m: &ChatMessage| m.role == Role::User;
    let cut = history
        .iter()
        .skip(earliest)
        .position(is_person)
        .map(|at| earliest + at)
        .or_else(|| history.iter().rposition(is_person))
        .unwrap_or(0);
    history.drain(..cut);
}

/// Whether a stored conversation is one this assistant could have written: no system
/// message (the page writes that fresh each turn), every tool result answering a call.
fn valid_history(history: &[ChatMessage]) -> bool {
    let mut asked: Vec<&str> = Vec::new();
    history.len() <= MAX_RESTORED_MESSAGES
        && history.iter().all(|m| match m.role {
            Role::System => false,
            Role::Tool => m
                .tool_call_id
                .as_deref()
                .is_some_and(|id| asked.contains(&id)),
            // Every call answerable by its id alone: no id twice in the conversation.
            Role::Assistant => m.tool_calls.iter().all(|c| {
                let fresh = !asked.contains(&c.id.as_str());
                asked.push(c.id.as_str());
                fresh
            }),
            Role::User => m.tool_calls.is_empty(),
        })
}

/// The untrusted content the model has read since the person's last message: results
/// and errors marked `"untrusted":true`, each named by its action's id.
fn untrusted_read(history: &[ChatMessage]) -> Vec<String> {
    let start = history
        .iter()
        .rposition(|m| m.role == Role::User)
        .map_or(0, |at| at + 1);
    let turn = history.get(start..).unwrap_or_default();
    turn.iter()
        .filter(|m| {
            m.role == Role::Tool
                && m.content
                    .as_deref()
                    .is_some_and(|c| c.contains(r#""untrusted":true"#))
        })
        .filter_map(|m| {
            let id = m.tool_call_id.as_deref()?;
            turn.iter()
                .flat_map(|m| &m.tool_calls)
                .find(|c| c.id == id)
                .map(|c| c.name.clone())
        })
        .collect()
}

/// The last assistant message's tool calls that have no result yet.
fn unanswered(history: &[ChatMessage]) -> Vec<ToolCall> {
    let Some(at) = history
        .iter()
        .rposition(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
    else {
        return Vec::new();
    };
    let answered: Vec<&str> = history
        .iter()
        .skip(at + 1)
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    history
        .get(at)
        .map(|m| {
            m.tool_calls
                .iter()
                .filter(|c| !answered.contains(&c.id.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// The result for a call that was not waiting on a person when the page went away: it
/// is settled here as not brought back (one terminal record), never run.
fn not_waiting(cs: &Countersign, call: &ToolCall) -> Option<countersign::Settled> {
    let pending = countersign::executor::Pending {
        call: Call::new(call.id.clone(), call.name.clone(), call.arguments.clone()),
        declaration: String::new(),
        handoff: false,
        remaining: std::time::Duration::ZERO,
        edited: None,
        untrusted: None,
    };
    cs.executor()
        .drop_pending(
            pending,
            countersign::reason::RestoreMiss::NotWaiting,
            crate::clock::now(),
        )
        .ok()
}

impl Assistant {
    /// Asks the model, waiting out a rate limit (`Retry-After`) and backing off from a
    /// failing model, up to [`MAX_RETRIES`] times; the dock says what it is doing. A
    /// switch to the offline assistant on the way is said too.
    async fn ask(&self, cs: &Countersign, request: ModelRequest) -> Result<ModelTurn, ModelError> {
        let strings = cs.locale().strings();
        let was_offline = self.is_offline();
        let mut tries = 0;
        let progress: Rc<dyn Fn(&Streaming)> = {
            let cs = cs.clone();
            Rc::new(move |so_far: &Streaming| cs.set_streaming(Some(so_far.clone())))
        };
        let result = loop {
            let answer = self
                .0
                .client
                .complete_streaming(request.clone(), Rc::clone(&progress))
                .await;
            cs.set_streaming(None);
            let wait_ms = match answer {
                Err(ModelError::RateLimited { retry_after_s })
                    if tries < MAX_RETRIES && retry_after_s <= MAX_RETRY_AFTER_S =>
                {
                    cs.push_log(LogEntry::Notice(
                        strings.rate_limited_waiting(retry_after_s),
                    ));
                    retry_after_s.saturating_mul(1000)
                }
                Err(ModelError::Failed { .. }) if tries < MAX_RETRIES => {
                    cs.push_log(LogEntry::Notice(strings.model_retrying.to_owned()));
                    RETRY_BACKOFF_MS << tries
                }
                other => break other,
            };
            tries += 1;
            gloo_timers::future::TimeoutFuture::new(wait_ms).await;
        };
        if !was_offline && self.is_offline() {
            cs.set_offline(true);
            cs.push_log(LogEntry::Notice(strings.went_offline.to_owned()));
        }
        if let Err(ModelError::StreamCut { text, preparing }) = &result {
            // Nothing of a cut answer reaches the gate; the model hears of it next turn.
            let mut note = text.clone();
            if !note.is_empty() {
                note.push(' ');
            }
            note.push_str(&format!(
                "[this reply was cut off before it finished{}; nothing of it was run]",
                if preparing.is_empty() {
                    String::new()
                } else {
                    format!(" while preparing {} tool call(s)", preparing.len())
                }
            ));
            self.0
                .history
                .borrow_mut()
                .push(ChatMessage::text(Role::Assistant, note));
            crate::restore::save_history(cs, &self.0.history.borrow());
        }
        result
    }

    /// Drops the oldest turns of the conversation until the request fits the client's
    /// cap (never the turn in progress); the dock says how many went.
    fn fit(&self, cs: &Countersign, tools: &[countersign::wire::ToolSpec]) {
        let Some(cap) = self.0.client.request_cap() else {
            return;
        };
        // The system message and the tools go with every request; a tenth is left for
        // the wire format's own keys.
        let fixed = system_message(cs).content.map_or(0, |c| c.len())
            + serde_json::to_string(tools).map_or(0, |t| t.len());
        let budget = (cap - cap / 10).saturating_sub(fixed);
        let mut history = self.0.history.borrow_mut();
        let size = |h: &[ChatMessage]| serde_json::to_string(h).map_or(usize::MAX, |t| t.len());
        let mut dropped = 0;
        while size(&history) > budget {
            // The oldest turn: up to the second person's message.
            let Some(next) = history
                .iter()
                .enumerate()
                .skip(1)
                .find(|(_, m)| m.role == Role::User)
                .map(|(i, _)| i)
            else {
                break;
            };
            history.drain(..next);
            dropped += 1;
        }
        drop(history);
        if dropped > 0 {
            let strings = cs.locale().strings();
            cs.push_log(LogEntry::Notice(strings.history_trimmed(dropped)));
            crate::restore::save_history(cs, &self.0.history.borrow());
        }
    }
}

fn system_message(cs: &Countersign) -> ChatMessage {
    let state = serde_json::Value::Object(cs.page_state()).to_string();
    let text = match cs.locale() {
        Locale::En => format!(
            "You are the assistant inside this web page. You act only through the tools listed. \
             A person approves consequential actions in the page, and some last steps only the person can do. \
             A refusal (PERMISSION_DENIED, APPROVAL_TIMEOUT, HANDOFF_CANCELLED, HANDOFF_TIMEOUT, HANDOFF_FAILED) is a decision: \
             tell the user it was not done and ask what to do next; never retry silently and never claim it happened. \
             Current page state (read-only): {state}"
        ),
        Locale::Zh => format!(
            "你是这个网页里的助手，只能通过列出的工具行动。重要操作由页面中的人批准，有些最后一步只能由人完成。\
             被拒绝（PERMISSION_DENIED、APPROVAL_TIMEOUT、HANDOFF_CANCELLED、HANDOFF_TIMEOUT、HANDOFF_FAILED）是人的决定：\
             告诉用户操作没有完成并询问下一步；不要静默重试，也不要声称已经完成。当前页面状态（只读）：{state}"
        ),
    };
    ChatMessage::text(Role::System, text)
}

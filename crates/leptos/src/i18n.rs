//! The dock's words in English and Chinese. No string the dock shows is hard-coded in
//! one language: every one comes from a [`Strings`] table.

use countersign::{Code, Kind};

/// A language the dock speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Locale {
    /// English (the default).
    #[default]
    En,
    /// Simplified Chinese.
    Zh,
}

impl Locale {
    /// The locale named by a `lang` value (`zh`, `zh-CN`, `en`…); English otherwise.
    pub fn from_tag(tag: &str) -> Self {
        if tag.trim().to_ascii_lowercase().starts_with("zh") {
            Locale::Zh
        } else {
            Locale::En
        }
    }

    /// The locale named by `?lang=` in a URL query string such as `?lang=zh&x=1`.
    pub fn from_query(query: &str) -> Self {
        query
            .trim_start_matches('?')
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == "lang")
            .map_or(Locale::En, |(_, value)| Locale::from_tag(value))
    }

    /// The BCP 47 tag, for `lang` attributes.
    pub const fn tag(self) -> &'static str {
        match self {
            Locale::En => "en",
            Locale::Zh => "zh-CN",
        }
    }

    /// The table of words for this locale.
    pub const fn strings(self) -> &'static Strings {
        match self {
            Locale::En => &EN,
            Locale::Zh => &ZH,
        }
    }
}

/// Every word the dock shows.
#[derive(Debug)]
pub struct Strings {
    /// The dock's heading.
    pub title: &'static str,
    /// The badge shown while the offline assistant is in use.
    pub offline_badge: &'static str,
    /// Its longer explanation (tooltip).
    pub offline_explained: &'static str,
    /// The chat input's placeholder.
    pub input_placeholder: &'static str,
    /// The send button.
    pub send: &'static str,
    /// Shown while the assistant works.
    pub working: &'static str,
    /// The approval queue's heading.
    pub approvals: &'static str,
    /// "{n} of {m}" in the queue.
    pub n_of_m: &'static str,
    /// The label before the consequence.
    pub consequence: &'static str,
    /// The label before the arguments.
    pub arguments: &'static str,
    /// "Allow once".
    pub allow_once: &'static str,
    /// "Always allow this session".
    pub allow_session: &'static str,
    /// "Deny".
    pub deny: &'static str,
    /// The deny reason field's label.
    pub deny_reason: &'static str,
    /// The hint that danger actions are asked every time.
    pub asked_every_time: &'static str,
    /// The label before what "always allow" would cover.
    pub grant_covers: &'static str,
    /// The label of a card's preview.
    pub preview: &'static str,
    /// The heading of a double confirmation's second card.
    pub second_confirmation: &'static str,
    /// Before the list of what changed on a card drawn again.
    pub changed_since: &'static str,
    /// A changed consequence.
    pub changed_consequence: &'static str,
    /// A changed preview.
    pub changed_preview: &'static str,
    /// A changed approval level.
    pub changed_level: &'static str,
    /// A changed second question.
    pub changed_question: &'static str,
    /// A changed "always allow" rule.
    pub changed_grant_rule: &'static str,
    /// The note under text with invisible, bidi-control or look-alike characters.
    pub hidden_characters: &'static str,
    /// The banner while away.
    pub mode_away: &'static str,
    /// The banner while unattended.
    pub mode_unattended: &'static str,
    /// The banner while approvals are bypassed.
    pub mode_bypass: &'static str,
    /// The banner when the policy file is broken.
    pub policy_broken: &'static str,
    /// The button that points at the action's element in the page.
    pub show_in_page: &'static str,
    /// The grants list heading.
    pub grants: &'static str,
    /// "Revoke".
    pub revoke: &'static str,
    /// The handoff panel heading.
    pub handoff: &'static str,
    /// "Step".
    pub step: &'static str,
    /// "Next step".
    pub next_step: &'static str,
    /// "I've done it".
    pub handoff_done: &'static str,
    /// "Cancel".
    pub handoff_cancel: &'static str,
    /// Said after "I've done it" while the page does not show the step done yet (before
    /// what will be checked).
    pub not_yet: &'static str,
    /// "Time left".
    pub time_left: &'static str,
    /// The warning a waiting card shows in its last 30 seconds.
    pub expires_soon: &'static str,
    /// The tab title's word for what waits, and a notification's title.
    pub approval_needed: &'static str,
    /// A notification's body: "{n} waiting for you" (`{n}` is replaced).
    pub waiting_for_you: &'static str,
    /// The header's settings control (its accessible name).
    pub settings: &'static str,
    /// A popup dock's fold control.
    pub fold: &'static str,
    /// The dock's button that turns notifications on.
    pub notify_setting: &'static str,
    /// The button that registers a passkey for approvals that need one.
    pub passkey_setup: &'static str,
    /// Before the MCP pairing code: what it is for.
    pub mcp_pairing: &'static str,
    /// Said once a passkey is registered.
    pub passkey_ready: &'static str,
    /// Said while the browser's passkey prompt is open.
    pub passkey_working: &'static str,
    /// Said before the reason a passkey was not set up.
    pub passkey_failed: &'static str,
    /// The enrollment code field's label.
    pub passkey_code: &'static str,
    /// Notifications are on.
    pub notify_on: &'static str,
    /// The browser refused notifications.
    pub notify_denied: &'static str,
    /// A control pressed by a script was refused.
    pub script_click_refused: &'static str,
    /// On a card brought back after a reload.
    pub restored_card: &'static str,
    /// On a card raised by untrusted content: before the source's name (in bold), and
    /// after it.
    pub untrusted_card: (&'static str, &'static str),
    /// On a card or handoff a browser agent asked for through WebMCP.
    pub asked_by_webmcp: &'static str,
    /// On a card or handoff an MCP client asked for through the gateway.
    pub asked_by_mcp: &'static str,
    /// The question panel's heading.
    pub question_heading: &'static str,
    /// A caller withdrew a waiting card: decisions wait a moment.
    pub withdrawn_hold: &'static str,
    /// The gateway refuses the page's audit records (the gateway's reason follows).
    pub trail_refused: &'static str,
    /// The gateway takes the page's audit records again.
    pub trail_taken: &'static str,
    /// The question panel's heading when an agent outside the page asks.
    pub question_heading_agent: &'static str,
    /// The question's submit button.
    pub answer: &'static str,
    /// The question's decline button.
    pub decline_question: &'static str,
    /// Outcome of a declined question.
    pub outcome_question_declined: &'static str,
    /// The caller (an agent outside the page) withdrew its call.
    pub outcome_cancelled: &'static str,
    /// The card's Edit button.
    pub edit: &'static str,
    /// The edit form's heading.
    pub edit_heading: &'static str,
    /// What submitting an edit does (it approves nothing).
    pub edit_hint: &'static str,
    /// The edit form's submit button.
    pub edit_submit: &'static str,
    /// The edit form's cancel button.
    pub edit_cancel: &'static str,
    /// The label of the JSON editor (for arguments the form cannot express).
    pub edit_json: &'static str,
    /// An optional field's "leave empty to omit" hint.
    pub edit_optional: &'static str,
    /// An edit that changed nothing.
    pub edit_unchanged: &'static str,
    /// A number field that is not a number.
    pub edit_not_a_number: &'static str,
    /// The heading of an edited call's diff.
    pub edited_by_you: &'static str,
    /// "Allow all in this batch".
    pub allow_batch: &'static str,
    /// What is checked when the person says done.
    pub will_check: &'static str,
    /// Kinds.
    pub kind_read: &'static str,
    /// Kinds.
    pub kind_write: &'static str,
    /// Kinds.
    pub kind_danger: &'static str,
    /// Outcome: done.
    pub outcome_done: &'static str,
    /// Outcome of a declined card.
    pub outcome_denied: &'static str,
    /// Outcome of an approval timeout.
    pub outcome_approval_timeout: &'static str,
    /// Outcome of a request that did not survive a reload.
    pub outcome_approval_expired: &'static str,
    /// Outcome of an approved call for which no countersignature could be minted.
    pub outcome_not_countersigned: &'static str,
    /// Outcome of a cancelled handoff.
    pub outcome_handoff_cancelled: &'static str,
    /// Outcome of a handoff timeout.
    pub outcome_handoff_timeout: &'static str,
    /// Outcome of a failed handoff: the step did not happen.
    pub outcome_handoff_failed: &'static str,
    /// Outcome of a removed or disabled action.
    pub outcome_unavailable: &'static str,
    /// Any other refusal.
    pub outcome_refused: &'static str,
    /// Shown when a model error ends a turn.
    pub error_prefix: &'static str,
    /// Shown when the step cap ends a turn.
    pub step_limit: &'static str,
    /// The gateway or the provider refused the request (401); what to do.
    pub model_unauthorized: &'static str,
    /// The request was too large for the gateway (413); what to do.
    pub model_too_large: &'static str,
    /// Still rate-limited after waiting; what to do.
    pub model_rate_limited: &'static str,
    /// The model kept failing (5xx); what to do.
    pub model_failed: &'static str,
    /// The gateway could not be reached; what happens.
    pub model_unreachable: &'static str,
    /// The model's answer could not be read.
    pub model_malformed: &'static str,
    /// The model answered with no words at all.
    pub empty_answer: &'static str,
    /// After a turn's error: nothing of the turn ran.
    pub nothing_ran: &'static str,
    /// After a turn's error: what the turn did run before it (`{list}`).
    pub ran_before: &'static str,
    /// The model's streamed answer was cut off.
    pub model_cut: &'static str,
    /// A tool call whose arguments are still arriving.
    pub preparing: &'static str,
    /// "Waiting {n} s" after a 429 (`{n}` is replaced).
    pub rate_limited_wait: &'static str,
    /// A failing model is being tried again.
    pub model_retrying: &'static str,
    /// The offline assistant took over mid-session.
    pub went_offline: &'static str,
    /// Beside the badge while the offline assistant answers.
    pub offline_now: &'static str,
    /// The button that asks for the model again.
    pub try_model_again: &'static str,
    /// The model answers again.
    pub model_back: &'static str,
    /// Still no model.
    pub model_still_away: &'static str,
    /// "{n} older turns were left out" (`{n}` is replaced).
    pub history_trimmed: &'static str,
    /// The empty chat's hint.
    pub empty_chat: &'static str,
    /// The conversation log's accessible name.
    pub conversation: &'static str,
    /// The heading of the calls done without asking.
    pub activity: &'static str,
    /// Why: the level needs no approval.
    pub why_no_approval: &'static str,
    /// Why: a grant ("always allow") or remembered rule covered it.
    pub why_grant: &'static str,
    /// Why: unattended mode stood in for the person.
    pub why_unattended: &'static str,
    /// Why: bypass mode skipped the approval.
    pub why_bypass: &'static str,
    /// Revokes the grant that allowed a call.
    pub revoke_grant: &'static str,
    /// What "always allow" covers when the action gave no words of its own;
    /// `{title}` is the action's title.
    pub every_call: &'static str,
    /// A short tag for a browser agent (WebMCP), in lists.
    pub tag_webmcp: &'static str,
    /// A short tag for an MCP client, in lists.
    pub tag_mcp: &'static str,
    /// After what a grant covers, when it was made on an outside agent's card.
    pub only_from_webmcp: &'static str,
    /// After what a grant covers, when it was made on an MCP client's card.
    pub only_from_mcp: &'static str,
}

impl Strings {
    /// The word for a kind.
    pub const fn kind(&self, kind: Kind) -> &'static str {
        match kind {
            Kind::Read => self.kind_read,
            Kind::Write => self.kind_write,
            Kind::Danger => self.kind_danger,
        }
    }

    /// "{n} of {m}".
    pub fn n_of_m(&self, n: usize, m: usize) -> String {
        self.n_of_m
            .replace("{n}", &n.to_string())
            .replace("{m}", &m.to_string())
    }

    /// A short tag for who asked, in lists, when it was not the page's own assistant.
    pub const fn caller_tag(&self, caller: countersign::Caller) -> Option<&'static str> {
        match caller {
            countersign::Caller::Assistant => None,
            countersign::Caller::WebMcp => Some(self.tag_webmcp),
            countersign::Caller::Mcp => Some(self.tag_mcp),
        }
    }

    /// Who asked, when it was not the page's own assistant.
    pub const fn asked_by(&self, caller: countersign::Caller) -> Option<&'static str> {
        match caller {
            countersign::Caller::Assistant => None,
            countersign::Caller::WebMcp => Some(self.asked_by_webmcp),
            countersign::Caller::Mcp => Some(self.asked_by_mcp),
        }
    }

    /// What "always allow" covers by default: every call of the action titled `title`.
    pub fn every_call_of(&self, title: &str) -> String {
        self.every_call.replace("{title}", title)
    }

    /// What a grant covers, in words: the rule (or every call of `title`), and for a
    /// grant made on an outside agent's card, that it covers only that caller.
    pub fn grant_covers(
        &self,
        rule: Option<&str>,
        title: &str,
        caller: countersign::Caller,
    ) -> String {
        let mut text = rule.map_or_else(|| self.every_call_of(title), str::to_owned);
        match caller {
            countersign::Caller::Assistant => {}
            countersign::Caller::WebMcp => text.push_str(self.only_from_webmcp),
            countersign::Caller::Mcp => text.push_str(self.only_from_mcp),
        }
        text
    }

    /// What changed on a card, in words.
    pub const fn card_change(&self, change: countersign::reason::CardChange) -> &'static str {
        use countersign::reason::CardChange as C;
        match change {
            C::Consequence => self.changed_consequence,
            C::Preview => self.changed_preview,
            C::Level => self.changed_level,
            C::Question => self.changed_question,
            C::GrantRule => self.changed_grant_rule,
        }
    }

    /// A sentence for how a call ended, as the dock's log shows it.
    pub const fn outcome(&self, code: Option<Code>) -> &'static str {
        match code {
            None => self.outcome_done,
            Some(Code::PermissionDenied) => self.outcome_denied,
            Some(Code::ApprovalTimeout) => self.outcome_approval_timeout,
            Some(Code::ApprovalExpired) => self.outcome_approval_expired,
            Some(Code::NotCountersigned) => self.outcome_not_countersigned,
            Some(Code::QuestionDeclined) => self.outcome_question_declined,
            Some(Code::Cancelled) => self.outcome_cancelled,
            Some(Code::HandoffCancelled) => self.outcome_handoff_cancelled,
            Some(Code::HandoffTimeout) => self.outcome_handoff_timeout,
            Some(Code::HandoffFailed) => self.outcome_handoff_failed,
            Some(Code::Unavailable) => self.outcome_unavailable,
            Some(_) => self.outcome_refused,
        }
    }

    /// "{n} waiting for you".
    pub fn waiting_count(&self, n: usize) -> String {
        self.waiting_for_you.replace("{n}", &n.to_string())
    }

    /// "trying again in {n} s".
    pub fn rate_limited_waiting(&self, seconds: u32) -> String {
        self.rate_limited_wait.replace("{n}", &seconds.to_string())
    }

    /// "{n} older turns were left out".
    pub fn history_trimmed(&self, turns: usize) -> String {
        self.history_trimmed.replace("{n}", &turns.to_string())
    }

    /// A model error in words, with what to do.
    pub fn model_error(&self, error: &crate::conversation::ModelError) -> String {
        use crate::conversation::ModelError as E;
        match error {
            E::Unauthorized(why) if !why.is_empty() => {
                format!("{} ({why})", self.model_unauthorized)
            }
            E::Unauthorized(_) => self.model_unauthorized.to_owned(),
            E::TooLarge => self.model_too_large.to_owned(),
            E::RateLimited { .. } => self.model_rate_limited.to_owned(),
            E::Failed { status, message } => {
                format!("{} (HTTP {status} {message})", self.model_failed)
            }
            E::Unavailable(_) | E::NotConfigured => self.model_unreachable.to_owned(),
            E::Malformed(_) => self.model_malformed.to_owned(),
            E::StreamCut { .. } => self.model_cut.to_owned(),
            // The gateway's own sentence names the flag that fixes it.
            E::Refused { .. } => error.to_string(),
        }
    }

    /// After a turn's error, what the turn ran before it (the titles of what was done).
    pub fn ran_in_turn(&self, ran: &[String]) -> String {
        if ran.is_empty() {
            self.nothing_ran.to_owned()
        } else {
            self.ran_before.replace("{list}", &ran.join(", "))
        }
    }

    /// A countdown as `m:ss`.
    pub fn countdown(&self, millis: u64) -> String {
        let secs = millis.div_ceil(1000);
        format!("{}:{:02}", secs / 60, secs % 60)
    }
}

static EN: Strings = Strings {
    title: "Assistant",
    offline_badge: "Offline assistant",
    offline_explained:
        "No model is configured: a built-in offline assistant answers from a fixed phrase table.",
    input_placeholder: "Ask the assistant…",
    send: "Send",
    working: "Working…",
    approvals: "Needs your approval",
    n_of_m: "{n} of {m}",
    consequence: "What will happen",
    arguments: "Arguments",
    allow_once: "Allow once",
    allow_session: "Always allow this session",
    deny: "Deny",
    deny_reason: "Reason (optional, sent to the assistant)",
    asked_every_time: "Dangerous: asked every time.",
    grant_covers: "“Always allow” covers",
    preview: "Preview",
    second_confirmation: "Second confirmation",
    changed_since: "This changed since you looked:",
    changed_consequence: "what will happen",
    changed_preview: "the preview",
    changed_level: "how often it is asked",
    changed_question: "the second question",
    changed_grant_rule: "what “always allow” covers",
    hidden_characters: "Contains invisible, direction-changing or look-alike characters, shown marked as \\u{…}.",
    mode_away: "Away: nothing that needs your approval will run.",
    mode_unattended: "Unattended: “ask” actions are approved automatically and recorded; dangerous ones are refused.",
    mode_bypass: "BYPASS: approvals are skipped (development only). Every call is recorded.",
    policy_broken: "The policy file is invalid, so nothing but undo actions will run:",
    show_in_page: "Show in page",
    grants: "Allowed for this session",
    revoke: "Revoke",
    handoff: "Your turn",
    step: "Step",
    next_step: "Next step",
    handoff_done: "I've done it",
    handoff_cancel: "Cancel",
    not_yet: "Not yet: the page does not show this yet. Finish the step, then press \u{201c}I've done it\u{201d} again.",
    time_left: "Time left",
    expires_soon: "This request expires in under 30 seconds; after that nothing runs.",
    approval_needed: "Approval needed",
    waiting_for_you: "{n} waiting for you in the assistant dock",
    settings: "Settings",
    fold: "Fold",
    notify_setting: "Notify me when something waits",
    passkey_setup: "Set up a passkey for approvals",
    passkey_ready: "Passkey set up: actions that need it ask you to verify with it.",
    mcp_pairing: "MCP clients act in this page with the pairing code",
    passkey_working: "Follow your browser's passkey prompt…",
    passkey_failed: "The passkey was not set up:",
    passkey_code: "Enrollment code (from the gateway):",
    notify_on: "Notifications on: you will be told when something waits while this tab is hidden.",
    notify_denied: "Notifications are blocked in this browser; the tab's title still shows what waits.",
    restored_card: "Brought back after the page reloaded: checked again, still waiting for you.",
    untrusted_card: ("This request comes after the assistant read", ", which may contain instructions that are not yours."),
    asked_by_webmcp: "Asked by a browser agent (WebMCP), not by this page's assistant.",
    asked_by_mcp: "Asked by an MCP client connected through the gateway, not by this page's assistant.",
    script_click_refused: "A script, not you, pressed a button on this request; it was refused and recorded. Only your own click decides.",
    question_heading: "The assistant asks you",
    question_heading_agent: "An agent outside this page asks you",
    withdrawn_hold: "An agent withdrew a request just now, so the cards moved. Look again before you decide.",
    trail_refused: "the gateway refuses this page's audit records (they wait in the page and are sent again). It says: ",
    trail_taken: "The gateway takes this page's audit records again.",
    answer: "Answer",
    decline_question: "Decline",
    outcome_question_declined: "Not answered: you declined",
    outcome_cancelled: "Withdrawn by the agent that asked: nothing was done",
    edit: "Edit",
    edit_heading: "Edit the arguments",
    edit_hint: "Submitting approves nothing: the edited call is checked again and shown to you to approve.",
    edit_submit: "Check edit",
    edit_cancel: "Cancel edit",
    edit_json: "Arguments (JSON)",
    edit_optional: "optional: leave empty to omit",
    edit_unchanged: "Nothing was changed.",
    edit_not_a_number: "is not a number",
    edited_by_you: "You edited this request:",
    allow_batch: "Allow all in this batch",
    will_check: "Will check",
    kind_read: "Read",
    kind_write: "Write",
    kind_danger: "Danger",
    outcome_done: "Done",
    outcome_denied: "Not done: you declined",
    outcome_approval_timeout: "Not done: nobody approved in time",
    outcome_approval_expired: "Not done: the request did not survive the reload",
    outcome_not_countersigned: "Not done: approved, but no countersignature could be minted",
    outcome_handoff_cancelled: "Not done: you cancelled the step",
    outcome_handoff_timeout: "Not done: the step timed out",
    outcome_handoff_failed: "The step did not happen: the page state did not change",
    outcome_unavailable: "Not done: no longer available",
    outcome_refused: "Refused",
    error_prefix: "Error",
    step_limit: "Stopped: the assistant reached its step limit.",
    model_unauthorized: "The gateway refused the request (401): the page's gateway token is missing or wrong, or the model provider rejected the gateway's key. Check the gateway's --token and its key file.",
    model_too_large: "The conversation is too large for the gateway (413), even with older messages left out. Start a new conversation (reload) or raise the gateway's --max-body-bytes.",
    model_rate_limited: "The model is still rate-limited (429). Wait a minute, then send your message again.",
    model_failed: "The model kept failing on its side. Try again later.",
    model_unreachable: "The gateway could not be reached; the offline assistant answers for now.",
    model_malformed: "The model's answer could not be read. Try again.",
    empty_answer: "The model gave no answer.",
    nothing_ran: "Nothing was run in this turn.",
    ran_before: "Done in this turn before that: {list}.",
    model_cut: "The model's answer was cut off before it finished; nothing of it was run. Send your message again.",
    preparing: "Preparing…",
    rate_limited_wait: "The model is busy (429): trying again in {n} s.",
    model_retrying: "The model failed on its side: trying again…",
    went_offline: "The model did not answer, so the offline assistant answers now. Use “Try the model again” to go back.",
    offline_now: "The offline assistant is answering.",
    try_model_again: "Try the model again",
    model_back: "The model answers again.",
    model_still_away: "Still no model answers; the offline assistant keeps answering.",
    history_trimmed: "{n} older turns were left out to fit the gateway's size limit.",
    empty_chat: "Ask the assistant to do something on this page. Anything that changes something is shown here for your approval first.",
    every_call: "every call of {title}",
    only_from_webmcp: " (asked by a browser agent only)",
    tag_webmcp: "browser agent",
    tag_mcp: "MCP client",
    only_from_mcp: " (asked by an MCP client only)",
    conversation: "Conversation",
    activity: "Done without asking",
    why_no_approval: "needs no approval",
    why_grant: "always allowed",
    why_unattended: "unattended",
    why_bypass: "bypass",
    revoke_grant: "Revoke that grant",
};

static ZH: Strings = Strings {
    title: "助手",
    offline_badge: "离线助手",
    offline_explained: "未配置模型：由内置离线助手按固定短语表回答。",
    input_placeholder: "向助手提问…",
    send: "发送",
    working: "处理中…",
    approvals: "需要你的批准",
    n_of_m: "第 {n} 项，共 {m} 项",
    consequence: "将会发生",
    arguments: "参数",
    allow_once: "允许一次",
    allow_session: "本次会话始终允许",
    deny: "拒绝",
    deny_reason: "理由（可选，会告知助手）",
    asked_every_time: "危险操作：每次都会询问。",
    grant_covers: "“始终允许”的范围",
    preview: "预览",
    second_confirmation: "二次确认",
    changed_since: "你查看之后，以下内容有变化：",
    changed_consequence: "将会发生的事",
    changed_preview: "预览",
    changed_level: "询问的频率",
    changed_question: "第二个问题",
    changed_grant_rule: "“始终允许”的范围",
    hidden_characters: "含有不可见、改变文字方向或形近的字符，已标记为 \\u{…}。",
    mode_away: "离开模式：需要你批准的操作都不会执行。",
    mode_unattended: "无人值守：“询问”类操作自动批准并记录；危险操作一律拒绝。",
    mode_bypass: "绕过模式：跳过所有审批（仅限开发），每次调用都会记录。",
    policy_broken: "策略文件无效，因此除撤销类操作外都不会执行：",
    show_in_page: "在页面中显示",
    grants: "本次会话已允许",
    revoke: "撤销",
    handoff: "轮到你了",
    step: "步骤",
    next_step: "下一步",
    handoff_done: "我已完成",
    handoff_cancel: "取消",
    not_yet: "还没有：页面上还看不到这一步。完成这一步后，再按\u{201c}我已完成\u{201d}。",
    time_left: "剩余时间",
    expires_soon: "此请求将在 30 秒内过期，过期后不会执行任何操作。",
    approval_needed: "需要批准",
    waiting_for_you: "助手面板中有 {n} 项等待你处理",
    settings: "设置",
    fold: "收起",
    notify_setting: "有事项等待时通知我",
    passkey_setup: "为批准设置通行密钥",
    passkey_ready: "通行密钥已设置：需要它的操作会请你用它验证。",
    mcp_pairing: "MCP 客户端凭此配对码在本页操作：",
    passkey_working: "请按浏览器的通行密钥提示操作…",
    passkey_failed: "通行密钥未设置：",
    passkey_code: "注册码（由网关提供）：",
    notify_on: "通知已开启：此标签页在后台时，有事项等待会通知你。",
    notify_denied: "此浏览器已阻止通知；标签页标题仍会显示等待的事项。",
    restored_card: "页面重新加载后恢复：已重新检查，仍在等待你决定。",
    untrusted_card: ("这个请求是在助手读取了", "之后提出的，其中可能含有并非出自你的指令。"),
    asked_by_webmcp: "由浏览器代理（WebMCP）请求，而不是本页的助手。",
    asked_by_mcp: "由通过网关连接的 MCP 客户端请求，而不是本页的助手。",
    script_click_refused: "有脚本（不是你）点击了此请求上的按钮；已拒绝并记录。只有你自己的点击才算数。",
    question_heading: "助手想问你",
    question_heading_agent: "本页之外的代理想问你",
    withdrawn_hold: "代理刚刚撤回了一个请求，卡片位置已变化。请再看一遍再决定。",
    trail_refused: "网关拒绝接收本页的审计记录（记录暂存在页面中，并会重新发送）。网关的说明：",
    trail_taken: "网关已重新接收本页的审计记录。",
    answer: "回答",
    decline_question: "拒绝回答",
    outcome_question_declined: "未回答：你拒绝了",
    outcome_cancelled: "请求的代理已撤回：未执行任何操作",
    edit: "编辑",
    edit_heading: "编辑参数",
    edit_hint: "提交编辑不会批准任何操作：编辑后的调用会重新检查，并再次请你批准。",
    edit_submit: "检查编辑",
    edit_cancel: "取消编辑",
    edit_json: "参数（JSON）",
    edit_optional: "可选：留空即省略",
    edit_unchanged: "没有任何改动。",
    edit_not_a_number: "不是数字",
    edited_by_you: "你编辑了此请求：",
    allow_batch: "全部允许（本批）",
    will_check: "将检查",
    kind_read: "读取",
    kind_write: "写入",
    kind_danger: "危险",
    outcome_done: "已完成",
    outcome_denied: "未执行：你已拒绝",
    outcome_approval_timeout: "未执行：无人及时批准",
    outcome_approval_expired: "未执行：页面重新加载后该请求未能恢复",
    outcome_not_countersigned: "未执行：已批准，但无法签发会签凭证",
    outcome_handoff_cancelled: "未执行：你取消了这一步",
    outcome_handoff_timeout: "未执行：这一步已超时",
    outcome_handoff_failed: "这一步没有发生：页面状态没有变化",
    outcome_unavailable: "未执行：该操作已不可用",
    outcome_refused: "已拒绝",
    error_prefix: "错误",
    step_limit: "已停止：助手达到步数上限。",
    model_unauthorized: "网关拒绝了请求（401）：页面的网关令牌缺失或错误，或模型服务商拒绝了网关的密钥。请检查网关的 --token 和密钥文件。",
    model_too_large: "对话对网关来说太大（413），即使省略了较早的消息。请开始新的对话（重新加载），或调高网关的 --max-body-bytes。",
    model_rate_limited: "模型仍然受到速率限制（429）。请稍等一分钟再发送。",
    model_failed: "模型在其一侧持续出错。请稍后再试。",
    model_unreachable: "无法连接网关；暂由离线助手回答。",
    model_malformed: "无法读取模型的回答。请再试一次。",
    empty_answer: "模型没有给出回答。",
    nothing_ran: "本轮没有执行任何操作。",
    ran_before: "本轮在此之前已完成：{list}。",
    model_cut: "模型的回答在完成前被中断；其中的任何内容都没有执行。请重新发送消息。",
    preparing: "准备中…",
    rate_limited_wait: "模型繁忙（429）：{n} 秒后重试。",
    model_retrying: "模型在其一侧出错：正在重试…",
    went_offline: "模型没有回应，现在由离线助手回答。可点“重新连接模型”返回。",
    offline_now: "离线助手正在回答。",
    try_model_again: "重新连接模型",
    model_back: "模型已恢复回答。",
    model_still_away: "仍然没有模型回答；继续由离线助手回答。",
    history_trimmed: "为符合网关的大小限制，省略了 {n} 轮较早的对话。",
    empty_chat: "请助手在本页上帮你做事。任何会改变内容的操作，都会先在这里请你批准。",
    every_call: "{title}的每次调用",
    only_from_webmcp: "（仅限浏览器代理的请求）",
    tag_webmcp: "浏览器代理",
    tag_mcp: "MCP 客户端",
    only_from_mcp: "（仅限 MCP 客户端的请求）",
    conversation: "对话记录",
    activity: "未经询问已执行",
    why_no_approval: "无需批准",
    why_grant: "已始终允许",
    why_unattended: "无人值守",
    why_bypass: "绕过模式",
    revoke_grant: "撤销该许可",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lang_query_picks_the_locale() {
        assert_eq!(Locale::from_query("?lang=zh"), Locale::Zh);
        assert_eq!(Locale::from_query("?x=1&lang=zh-CN"), Locale::Zh);
        assert_eq!(Locale::from_query("?lang=en"), Locale::En);
        assert_eq!(Locale::from_query(""), Locale::En);
        assert_eq!(Locale::from_query("?lang"), Locale::En);
    }

    #[test]
    fn every_outcome_has_words_in_both_languages_and_they_differ() {
        for code in std::iter::once(None).chain(Code::ALL.into_iter().map(Some)) {
            let (en, zh) = (EN.outcome(code), ZH.outcome(code));
            assert!(!en.is_empty() && !zh.is_empty());
            assert_ne!(en, zh, "{code:?}");
        }
        assert_eq!(ZH.n_of_m(2, 3), "第 2 项，共 3 项");
        assert_eq!(EN.n_of_m(2, 3), "2 of 3");
    }

    #[test]
    fn countdowns_round_up_to_the_second() {
        assert_eq!(EN.countdown(300_000), "5:00");
        assert_eq!(EN.countdown(1), "0:01");
        assert_eq!(EN.countdown(0), "0:00");
    }
}

//! The workspace's state: signals the page shows and the actions change.

use leptos::prelude::*;

/// The name a new (or reset) workspace has.
pub(crate) const DEFAULT_NAME: &str = "Atlas";
/// The verification code of this tutorial (a real app sends one to the person).
pub(crate) const VERIFICATION_CODE: &str = "246810";

/// Every piece of page state, as `Copy` signals.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Workspace {
    pub(crate) name: RwSignal<String>,
    pub(crate) draft_name: RwSignal<String>,
    pub(crate) description: RwSignal<String>,
    pub(crate) archived: RwSignal<bool>,
    pub(crate) published: RwSignal<bool>,
    pub(crate) code: RwSignal<String>,
    pub(crate) code_error: RwSignal<bool>,
}

impl Workspace {
    pub(crate) fn new(description: &str) -> Self {
        Self {
            name: RwSignal::new(DEFAULT_NAME.to_owned()),
            draft_name: RwSignal::new(DEFAULT_NAME.to_owned()),
            description: RwSignal::new(description.to_owned()),
            archived: RwSignal::new(false),
            published: RwSignal::new(false),
            code: RwSignal::new(String::new()),
            code_error: RwSignal::new(false),
        }
    }

    pub(crate) fn rename(&self, name: &str) {
        self.name.set(name.to_owned());
        self.draft_name.set(name.to_owned());
    }

    pub(crate) fn reset(&self) {
        self.rename(DEFAULT_NAME);
        self.description.set(String::new());
    }

    /// The person pressed Publish: only the right code publishes.
    pub(crate) fn press_publish(&self) {
        let right = self.code.with_untracked(|c| c.trim() == VERIFICATION_CODE);
        if right && !self.archived.get_untracked() {
            self.published.set(true);
            self.code_error.set(false);
        } else {
            self.code_error.set(true);
        }
    }
}

/// A workspace name: 1 to 64 characters after trimming, no control characters and no
/// format characters (zero-width spaces, bidi overrides: Unicode Cf), which would make
/// two names look the same or reorder the text around them.
pub(crate) fn validate_name(name: &str) -> Result<(), String> {
    let name = name.trim();
    let chars = name.chars().count();
    if chars == 0 {
        return Err("the name is empty".into());
    }
    if chars > 64 {
        return Err(format!("the name has {chars} characters; the limit is 64"));
    }
    if name.chars().any(char::is_control) {
        return Err("the name must not contain control characters".into());
    }
    if let Some(c) = name.chars().find(|c| countersign::text::is_format_char(*c)) {
        return Err(format!(
            "the name must not contain invisible format characters (it has U+{:04X})",
            u32::from(c)
        ));
    }
    Ok(())
}

/// A description: at most 200 characters, no control or format characters.
pub(crate) fn validate_description(text: &str) -> Result<(), String> {
    let chars = text.chars().count();
    if chars > 200 {
        return Err(format!(
            "the description has {chars} characters; the limit is 200"
        ));
    }
    if text
        .chars()
        .any(|c| c.is_control() || countersign::text::is_format_char(c))
    {
        return Err("the description must not contain control or invisible characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_checked() {
        assert!(validate_description("Rockets and moons").is_ok());
        assert!(validate_description(&"x".repeat(201)).is_err());
        assert!(validate_description("a\u{202e}b").is_err());
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("Apollo").is_ok());
        assert!(validate_name("  阿波罗  ").is_ok());
        assert!(validate_name("   ").is_err());
        assert!(validate_name(&"x".repeat(65)).is_err());
        assert!(validate_name("a\u{0}b").is_err());
        assert!(validate_name(&"名".repeat(64)).is_ok());
        for hidden in [
            "Atlas\u{200b}",
            "Ops\u{202e}ATAD-evil",
            "a\u{2066}b",
            "\u{feff}x",
        ] {
            let e = validate_name(hidden).unwrap_err();
            assert!(e.contains("format characters"), "{e}");
        }
    }
}

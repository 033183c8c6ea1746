//! Prompts as sentence-transformers applies them: config_sentence_transformers.json's `prompts`
//! (a name for each text to put before a text) and `default_prompt_name` (the one `encode`
//! prepends when asked for none), and 1_Pooling's `include_prompt`: when false, the prompt's
//! tokens (and `[CLS]` before them) are left out of the pooling, as its Pooling zeroes their
//! mask (`prompt_length` = the prompt's tokens with `[CLS]`, without the trailing `[SEP]`).
use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq)]
pub struct Prompts {
    /// (name, text), by name.
    pub named: Vec<(String, String)>,
    pub default_name: Option<String>,
    /// 1_Pooling's include_prompt (true where the folder does not say).
    pub include_prompt: bool,
}

impl Default for Prompts {
    fn default() -> Prompts {
        Prompts {
            named: Vec::new(),
            default_name: None,
            include_prompt: true,
        }
    }
}

/// The prompt names `encode_document` looks for, in sentence-transformers' order.
const DOCUMENT_NAMES: [&str; 3] = ["document", "passage", "corpus"];

impl Prompts {
    /// A name's text.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.named
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
    }

    /// The default prompt's (name, text), if the folder names one that it has.
    pub fn default_prompt(&self) -> Option<(&str, &str)> {
        let name = self.default_name.as_deref()?;
        Some((name, self.get(name)?))
    }

    /// The prompt `encode` applies: `text` when given, else `name`'s, else the default's (as
    /// sentence-transformers' `encode(prompt=, prompt_name=)`); an unknown name is an error
    /// naming the folder's prompts.
    pub fn resolve(&self, name: Option<&str>, text: Option<&str>) -> Result<Option<String>> {
        if let Some(t) = text {
            return Ok(Some(t.to_string()));
        }
        match name {
            Some(n) => self.get(n).map(|t| Some(t.to_string())).ok_or_else(|| {
                Error::msg(format!(
                    "prompt name '{n}' is not one of the model's prompts ({})",
                    self.names()
                ))
            }),
            None => Ok(self.default_prompt().map(|(_, t)| t.to_string())),
        }
    }

    /// The prompt `--prompt-name` / `--prompt` ask for; without either, `resolve`'s default or,
    /// for a retrieval corpus (`document`), `encode_document`'s.
    pub fn for_flags(
        &self,
        name: Option<&str>,
        text: Option<&str>,
        document: bool,
    ) -> Result<Option<String>> {
        match (name, text) {
            (None, None) if document => Ok(self.document()),
            (name, text) => self.resolve(name, text),
        }
    }

    /// What `encode_query` applies: the "query" prompt, else the default.
    pub fn query(&self) -> Option<String> {
        self.get("query")
            .or_else(|| self.default_prompt().map(|p| p.1))
            .map(str::to_string)
    }

    /// What `encode_document` applies: the "document", "passage" or "corpus" prompt (the first
    /// the folder has), else the default.
    pub fn document(&self) -> Option<String> {
        DOCUMENT_NAMES
            .iter()
            .find_map(|n| self.get(n))
            .or_else(|| self.default_prompt().map(|p| p.1))
            .map(str::to_string)
    }

    /// The prompts' names, for messages ("none" without any).
    pub fn names(&self) -> String {
        match self.named.is_empty() {
            true => "the folder has none".to_string(),
            false => self
                .named
                .iter()
                .map(|(n, _)| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// config_sentence_transformers.json's value (None: no such file) and the Pooling's
    /// include_prompt; a default name without its prompt is an error naming the file.
    pub fn from_config(
        config: Option<(&std::path::Path, &serde_json::Value)>,
        include_prompt: bool,
    ) -> Result<Prompts> {
        let mut p = Prompts {
            include_prompt,
            ..Prompts::default()
        };
        let Some((path, v)) = config else {
            return Ok(p);
        };
        if let Some(m) = v.get("prompts").and_then(|m| m.as_object()) {
            for (name, text) in m {
                let text = text
                    .as_str()
                    .ok_or_else(|| Error::file(path, format!("prompt '{name}' is not a string")))?;
                p.named.push((name.clone(), text.to_string()));
            }
        }
        p.default_name = v
            .get("default_prompt_name")
            .and_then(|n| n.as_str())
            .map(str::to_string);
        if let Some(n) = &p.default_name {
            if p.get(n).is_none() {
                return Err(Error::file(
                    path,
                    format!(
                        "default_prompt_name '{n}' is not one of its prompts ({})",
                        p.names()
                    ),
                ));
            }
        }
        Ok(p)
    }
}

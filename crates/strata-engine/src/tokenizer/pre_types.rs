//! The pre-tokenizer each `tokenizer.ggml.pre` value selects, and the flags it implies.
//!
//! Mirrors the `tokenizer_pre` name table in `llama_vocab::impl::load` and the `regex_exprs`
//! table in the `llm_tokenizer_bpe` constructor (llama.cpp `src/llama-vocab.cpp`). Each stage
//! splits every piece the previous stage produced; see [`super::pretokenize`].

/// One splitting pass over the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// GPT-2: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
    Gpt2,
    /// The llama3 / qwen2 family: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
    /// \p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, where with
    /// `marks` (qwen35) combining marks count as letters.
    Words { max_digits: usize, marks: bool },
    /// `[^\n]+|[\n]+`.
    Newlines,
    /// Any other pattern, run the way llama.cpp runs `std::regex` (see [`super::regex_split`]).
    Regex(&'static str),
}

use Stage::{Gpt2, Newlines, Regex, Words};

/// What a `tokenizer.ggml.pre` value implies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PreType {
    pub stages: &'static [Stage],
    /// A word that is itself a token is emitted whole, without merges.
    pub ignore_merges: bool,
    /// Detokenization removes spaces before `?!.,` and around apostrophes.
    pub clean_spaces: bool,
    /// Default for `tokenizer.ggml.add_bos_token`.
    pub add_bos: bool,
    /// The default BOS id (11 for BPE) is dropped (chatglm).
    pub no_default_bos: bool,
}

const LLAMA3: &[Stage] = &[Words {
    max_digits: 3,
    marks: false,
}];
const QWEN2: &[Stage] = &[Words {
    max_digits: 1,
    marks: false,
}];
const QWEN35: &[Stage] = &[Words {
    max_digits: 1,
    marks: true,
}];
const GPT2: &[Stage] = &[Gpt2];
const STARCODER: &[Stage] = &[Regex(r"\p{N}"), Gpt2];
const DEFAULT: &[Stage] = &[
    Regex(r"[\p{P}\$\+<=>\^~\|]+"),
    Gpt2,
    Regex(r"\p{N}+"),
    Regex("[0-9][0-9][0-9]"),
];
const FALCON: &[Stage] = &[
    Regex(r"[\p{P}\$\+<=>\^~\|`]+"),
    Gpt2,
    Regex("[0-9][0-9][0-9]"),
];
const DEEPSEEK_LLM: &[Stage] = &[
    Regex("[\r\n]"),
    Regex("\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+"),
    Regex("\\s?[!-/:-~\u{FF01}-\u{FF0F}\u{FF1A}-\u{FF5E}\u{2018}-\u{201F}\u{3000}-\u{3002}]+"),
    Regex(r"\s+$"),
    Regex("[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]+"),
    Regex(r"\p{N}+"),
];
const DEEPSEEK_CODER: &[Stage] = &[
    Regex("[\r\n]"),
    Regex(r"\s?\p{L}+"),
    Regex(r"\s?\p{P}+"),
    Regex("[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]+"),
    Regex(r"\p{N}"),
];
const DEEPSEEK3: &[Stage] = &[
    Regex(r"\p{N}{1,3}"),
    Regex("[\u{4E00}-\u{9FA5}\u{3040}-\u{309F}\u{30A0}-\u{30FF}]+"),
    Regex(
        r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
    ),
];
const PORO: &[Stage] = &[Regex(
    " ?[^(\\s|.,!?\u{2026}\u{3002}\u{FF0C}\u{3001}\u{964}\u{6D4}\u{60C})]+",
)];
const VIKING: &[Stage] = &[
    Regex(" ?[^(\\s|.,!?\u{2026}\u{3002}\u{FF0C}\u{3001}\u{964}\u{6D4}\u{60C})]+"),
    Regex(r"\p{N}"),
];
const TEKKEN: &[Stage] = &[Regex(
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)];
const GPT4O: &[Stage] = &[Regex(
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)];
const SEED_CODER: &[Stage] = &[Regex(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
)];
const BAILINGMOE: &[Stage] = &[Regex(
    r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
)];
const UFAKZEKA: &[Stage] = &[Regex(
    r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)];
const MINICPM5: &[Stage] = &[
    Regex(r"\p{N}{1,3}"),
    Regex(
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
];
const LAGUNA: &[Stage] = &[
    Newlines,
    Words {
        max_digits: 1,
        marks: false,
    },
];

const fn pre(stages: &'static [Stage]) -> PreType {
    PreType {
        stages,
        ignore_merges: false,
        clean_spaces: true,
        add_bos: false,
        no_default_bos: false,
    }
}

const fn unclean(stages: &'static [Stage]) -> PreType {
    PreType {
        clean_spaces: false,
        ..pre(stages)
    }
}

/// The pre-tokenizer for a `tokenizer.ggml.pre` value; `None` when unsupported. An absent key
/// means `"default"` (llama.cpp warns that quality degrades).
pub(crate) fn lookup(name: &str) -> Option<PreType> {
    let p = match name {
        "default" => pre(DEFAULT),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => PreType {
            ignore_merges: true,
            add_bos: true,
            ..pre(LLAMA3)
        },
        "dbrx" | "smaug-bpe" => pre(LLAMA3),
        "deepseek-llm" => unclean(DEEPSEEK_LLM),
        "deepseek-coder" => unclean(DEEPSEEK_CODER),
        "deepseek-v3" | "hunyuan-dense" | "joyai-llm" | "hy_v4" => unclean(DEEPSEEK3),
        "falcon" => pre(FALCON),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
            pre(STARCODER)
        }
        "command-r" | "smollm" => unclean(STARCODER),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe"
        | "mpt" | "olmo" | "jais" | "exaone4" => pre(GPT2),
        "trillion" | "granite-docling" => unclean(GPT2),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open"
        | "grok-2" => unclean(QWEN2),
        "stablelm2" | "megrez" => pre(QWEN2),
        "qwen35" => unclean(QWEN35),
        "poro-chat" => unclean(PORO),
        "bloom" | "gpt3-finnish" => pre(PORO),
        "viking" => unclean(VIKING),
        "chatglm-bpe" => PreType {
            no_default_bos: true,
            ..pre(LLAMA3)
        },
        "glm4" | "glm5" => PreType {
            no_default_bos: true,
            ignore_merges: true,
            ..pre(LLAMA3)
        },
        "tekken" => PreType {
            ignore_merges: true,
            add_bos: true,
            ..unclean(TEKKEN)
        },
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => unclean(GPT4O),
        "seed-coder" => unclean(SEED_CODER),
        "bailingmoe" | "bailingmoe2" | "llada-moe" => unclean(BAILINGMOE),
        "ufakzeka" => unclean(UFAKZEKA),
        "minicpm5" => PreType {
            ignore_merges: true,
            ..pre(MINICPM5)
        },
        "laguna" => unclean(LAGUNA),
        _ => return None,
    };
    Some(p)
}

/// Every stage list in the table, for the test that compiles all patterns.
#[cfg(test)]
pub(crate) const ALL_STAGE_LISTS: &[&[Stage]] = &[
    LLAMA3,
    QWEN2,
    QWEN35,
    GPT2,
    STARCODER,
    DEFAULT,
    FALCON,
    DEEPSEEK_LLM,
    DEEPSEEK_CODER,
    DEEPSEEK3,
    PORO,
    VIKING,
    TEKKEN,
    GPT4O,
    SEED_CODER,
    BAILINGMOE,
    UFAKZEKA,
    MINICPM5,
    LAGUNA,
];

//! Chat templates (tokenizer.chat_template) rendered with minijinja.

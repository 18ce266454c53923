"""The checkpoint's own tokenizer (``tokenizer.json`` through the ``tokenizers`` library) and
chat template (``tokenizer_config.json`` or ``chat_template.jinja``, rendered with jinja2),
plus an incremental detokeniser for streaming."""
from __future__ import annotations

import json
import os
from typing import Optional


class Tokenizer:
    def __init__(self, path: str):
        f = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(f):
            raise FileNotFoundError(f"model: no tokenizer.json in {path!r} (fastpath reads the "
                                    "fast-tokenizer file of a Hugging Face checkpoint)")
        from tokenizers import Tokenizer as _Tok

        self._tok = _Tok.from_file(f)
        cfg = {}
        tc = os.path.join(path, "tokenizer_config.json")
        if os.path.isfile(tc):
            with open(tc) as fh:
                cfg = json.load(fh)
        self.template = cfg.get("chat_template")
        jinja = os.path.join(path, "chat_template.jinja")
        if self.template is None and os.path.isfile(jinja):
            with open(jinja) as fh:
                self.template = fh.read()
        if isinstance(self.template, list):  # [{"name": ..., "template": ...}]
            self.template = next((t["template"] for t in self.template if t.get("name") == "default"),
                                 self.template[0]["template"])
        self.bos = self._token(cfg.get("bos_token"))
        self.eos = self._token(cfg.get("eos_token"))
        self.add_bos = bool(cfg.get("add_bos_token", False))

    @staticmethod
    def _token(t) -> Optional[str]:
        return t.get("content") if isinstance(t, dict) else t

    def token_id(self, text: Optional[str]) -> Optional[int]:
        return None if text is None else self._tok.token_to_id(text)

    def encode(self, text: str, *, chat: bool = False, system: Optional[str] = None, **template_vars) -> list:
        """Token ids of ``text``; ``chat``: wrapped in the chat template (a system message first if
        given), ``template_vars`` passed to it (e.g. ``enable_thinking=False`` for Qwen3)."""
        if chat:
            if self.template is None:
                raise ValueError("chat: this tokenizer has no chat template; pass a plain prompt")
            text = self.apply_chat_template(([{"role": "system", "content": system}] if system else [])
                                            + [{"role": "user", "content": text}], **template_vars)
            return self._tok.encode(text, add_special_tokens=False).ids
        ids = self._tok.encode(text, add_special_tokens=False).ids
        bos = self.token_id(self.bos)
        if self.add_bos and bos is not None and (not ids or ids[0] != bos):
            ids = [bos] + ids
        return ids

    def decode(self, ids) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)

    def apply_chat_template(self, messages: list, add_generation_prompt: bool = True, **template_vars) -> str:
        """The template rendered as transformers renders it: variables not given stay undefined
        (the template's own defaults, e.g. Qwen3's thinking on), ``template_vars`` added."""
        import jinja2

        def raise_exception(msg):
            raise ValueError(f"chat template: {msg}")

        def strftime_now(fmt):
            import datetime
            return datetime.datetime.now().strftime(fmt)

        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
        env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now)
        return env.from_string(self.template).render(
            messages=messages, add_generation_prompt=add_generation_prompt, bos_token=self.bos or "",
            eos_token=self.eos or "", **template_vars)


class StreamDecoder:
    """Turns a growing list of token ids into text pieces: each call returns the text added
    since the last one, holding back an incomplete UTF-8 sequence."""

    def __init__(self, tok: Tokenizer):
        self.tok, self.ids, self.sent = tok, [], 0

    def add(self, ids) -> str:
        self.ids.extend(ids)
        text = self.tok.decode(self.ids)
        if text.endswith("\ufffd"):
            return ""
        piece, self.sent = text[self.sent:], len(text)
        return piece

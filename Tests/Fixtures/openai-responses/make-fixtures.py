"""Writes the OpenAI Responses API stream fixtures in this directory.

They are written from the documented event shapes (the openai-python SDK's
`types/responses/*` models: ResponseStreamEvent and the Response object), not
captured from the live API. Run it from anywhere; it rewrites every *.sse here.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = "gpt-5-mini-2025-08-07"
CREATED = 1763900000


def response(rid: str, status: str, output: list, usage: dict | None = None, incomplete: str | None = None, error: dict | None = None) -> dict:
    return {
        "id": rid, "object": "response", "created_at": CREATED, "status": status, "background": False,
        "error": error, "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": None, "max_output_tokens": None, "model": MODEL, "output": output,
        "parallel_tool_calls": True, "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": "auto"}, "store": False, "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto", "tools": [],
        "top_p": 1.0, "truncation": "disabled", "usage": usage, "user": None, "metadata": {},
    }


def usage(inp: int, out: int, cached: int = 0, reasoning: int = 0) -> dict:
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": inp + out}


class Stream:
    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.events: list[dict] = []
        self.output: list[dict] = []

    def emit(self, type_: str, **fields) -> None:
        self.events.append({"type": type_, "sequence_number": len(self.events), **fields})

    def start(self) -> None:
        self.emit("response.created", response=response(self.rid, "in_progress", []))
        self.emit("response.in_progress", response=response(self.rid, "in_progress", []))

    def message(self, item_id: str, pieces: list[str], *, refusal: bool = False, status: str = "completed") -> None:
        index = len(self.output)
        self.emit("response.output_item.added", output_index=index,
                  item={"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"})
        if refusal:
            self.emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part={"type": "refusal", "refusal": ""})
            for p in pieces:
                self.emit("response.refusal.delta", item_id=item_id, output_index=index, content_index=0, delta=p)
            text = "".join(pieces)
            self.emit("response.refusal.done", item_id=item_id, output_index=index, content_index=0, refusal=text)
            part = {"type": "refusal", "refusal": text}
        else:
            self.emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                      part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""})
            for p in pieces:
                self.emit("response.output_text.delta", item_id=item_id, output_index=index, content_index=0, delta=p, logprobs=[])
            text = "".join(pieces)
            self.emit("response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=text, logprobs=[])
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
        self.emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
        item = {"id": item_id, "type": "message", "status": status, "content": [part], "role": "assistant"}
        self.emit("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def reasoning(self, item_id: str, parts: list[list[str]], encrypted: str | None) -> None:
        index = len(self.output)
        self.emit("response.output_item.added", output_index=index, item={"id": item_id, "type": "reasoning", "summary": []})
        summary = []
        for n, pieces in enumerate(parts):
            self.emit("response.reasoning_summary_part.added", item_id=item_id, output_index=index, summary_index=n, part={"type": "summary_text", "text": ""})
            for p in pieces:
                self.emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=index, summary_index=n, delta=p)
            text = "".join(pieces)
            self.emit("response.reasoning_summary_text.done", item_id=item_id, output_index=index, summary_index=n, text=text)
            self.emit("response.reasoning_summary_part.done", item_id=item_id, output_index=index, summary_index=n, part={"type": "summary_text", "text": text})
            summary.append({"type": "summary_text", "text": text})
        item = {"id": item_id, "type": "reasoning", "summary": summary}
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        self.emit("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def call_added(self, item_id: str, call_id: str, name: str) -> int:
        index = len(self.output)
        self.emit("response.output_item.added", output_index=index,
                  item={"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id, "name": name})
        self.output.append({"id": item_id, "type": "function_call", "call_id": call_id, "name": name})
        return index

    def call_delta(self, item_id: str, index: int, delta: str) -> None:
        self.emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=delta)

    def call_done(self, item_id: str, index: int, arguments: str, status: str = "completed") -> None:
        item = {**self.output[index], "status": status, "arguments": arguments}
        if status == "completed":
            self.emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
        self.emit("response.output_item.done", output_index=index, item=item)
        self.output[index] = item

    def complete(self, u: dict | None) -> None:
        self.emit("response.completed", response=response(self.rid, "completed", self.output, u))

    def incomplete(self, reason: str, u: dict) -> None:
        self.emit("response.incomplete", response=response(self.rid, "incomplete", self.output, u, incomplete=reason))

    def write(self, name: str) -> None:
        body = "".join(f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'), ensure_ascii=False)}\n\n" for e in self.events)
        (HERE / name).write_text(body, encoding="utf-8")


RID = "resp_68a1c0ffee0000000000000000000000000000000000"

s = Stream(RID + "01")
s.start()
s.message("msg_text01", ["The", " capital", " of", " France", " is", " Paris", " (Î", "le-de-France) ✓", "."])
s.complete(usage(21, 9))
s.write("text.sse")

s = Stream(RID + "02")
s.start()
s.reasoning("rs_reason02", [["**Finding", " the weather**\n\nThe user", " asks about Paris."], ["I should call", " get_weather."]],
            "gAAAAABoEncryptedReasoningPayload02==")
i = s.call_added("fc_call02", "call_Q8x2Weather", "get_weather")
for piece in ['{"', 'city', '":"', 'Par', 'is', '","unit', '":"c', '"}']:
    s.call_delta("fc_call02", i, piece)
s.call_done("fc_call02", i, '{"city":"Paris","unit":"c"}')
s.complete(usage(312, 86, cached=256, reasoning=64))
s.write("reasoning-function-call.sse")

s = Stream(RID + "03")
s.start()
a = s.call_added("fc_call03a", "call_Paris03", "get_weather")
b = s.call_added("fc_call03b", "call_Stock03", "get_stock_price")
for x, y in [('{"city":', '{"ticker":'), ('"Paris"}', '"AAPL"}')]:
    s.call_delta("fc_call03a", a, x)
    s.call_delta("fc_call03b", b, y)
s.call_done("fc_call03a", a, '{"city":"Paris"}')
s.call_done("fc_call03b", b, '{"ticker":"AAPL"}')
s.complete(usage(120, 40))
s.write("parallel-function-calls.sse")

s = Stream(RID + "04")
s.start()
s.message("msg_cut04", ['{"', 'title', '": "A'], status="incomplete")
s.incomplete("max_output_tokens", usage(40, 16, reasoning=12))
s.write("incomplete-max-output-tokens.sse")

s = Stream(RID + "05")
s.start()
s.message("msg_filter05", ["Here is how"], status="incomplete")
s.incomplete("content_filter", usage(30, 3))
s.write("incomplete-content-filter.sse")

s = Stream(RID + "06")
s.start()
i = s.call_added("fc_cut06", "call_Cut06", "write_file")
for piece in ['{"path":"notes.txt",', '"text":"Line one\\n', 'Line two']:
    s.call_delta("fc_cut06", i, piece)
s.call_done("fc_cut06", i, '{"path":"notes.txt","text":"Line one\\nLine two', status="incomplete")
s.incomplete("max_output_tokens", usage(50, 24))
s.write("incomplete-truncated-function-call.sse")

s = Stream(RID + "07")
s.start()
s.message("msg_refusal07", ["I'm sorry,", " I can't", " help with that."], refusal=True)
s.complete(usage(18, 8))
s.write("refusal.sse")

s = Stream(RID + "08")
s.start()
s.emit("response.failed", response=response(RID + "08", "failed", [], None, error={"code": "server_error", "message": "The server had an error while processing your request. Sorry about that!"}))
s.write("failed.sse")

s = Stream(RID + "09")
s.start()
s.message("msg_text09", ["Partial"])
s.emit("error", code="rate_limit_exceeded", message="Rate limit reached for requests per min (RPM). Please try again in 1.2s.", param=None)
s.write("error-event.sse")

s = Stream(RID + "10")
s.start()
s.reasoning("rs_quiet10", [], "gAAAAABoEncryptedNoSummary10==")
s.message("msg_text10", ['{"city":', ' "Paris", ', '"celsius": 18}'])
s.complete(usage(64, 30, reasoning=16))
s.write("structured-output.sse")

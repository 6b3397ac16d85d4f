"""Word-photos as MCP resources: ``pps://word-photos/<file>.md`` (the newest listed, every one by template)."""

from __future__ import annotations

import json

from pps_core import ResourceItem, Resources
from pps_core.publish import as_list, tail

LISTED = 50  # the newest word-photos shown by resources/list; the template reaches every one


async def items(call) -> list[ResourceItem]:
    listing = await call("anchor_list", {"limit": LISTED})
    return [ResourceItem(uri=f"pps://word-photos/{p['filename']}", name=p["filename"], title=p.get("title"),
                         description=f"word-photo of {p['date'][:10]}" if p.get("date") else "word-photo")
            for p in listing["word_photos"]]


async def read(call, uri: str) -> str:
    photo = await call("anchor_get", {"filename": tail(uri, FAMILY, "word-photo")})
    meta = {k: photo.get(k) for k in ("title", "date", "tags", "location") if photo.get(k)}
    front = "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in meta.items())
    return f"---\n{front}\n---\n\n{photo['content']}\n"


async def complete(call, argument: str, value: str) -> list[str]:
    if argument != "filename":
        return []
    listing = await call("anchor_list", {"limit": 1000})
    return as_list([p["filename"] for p in listing["word_photos"]], value)


FAMILY = Resources(family="word-photos", description="each word-photo, as markdown with its front matter",
                   items=items, read=read, template="pps://word-photos/{filename}", complete=complete,
                   changed_by=frozenset({"anchor_save", "anchor_edit", "anchor_delete", "anchor_resync"}))

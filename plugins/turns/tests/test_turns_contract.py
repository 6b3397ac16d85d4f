from pps_core.testing import LayerContract


class TestRawCaptureContract(LayerContract):
    plugins = ["sqlite"]
    layer_name = "raw_capture"

    async def add_items(self, memory, texts):
        for t in texts:
            await memory.call("store_message", {"content": t, "author_name": "A", "channel": "c"})


class TestSummariesContract(LayerContract):
    plugins = ["sqlite"]
    layer_name = "message_summaries"

    async def add_items(self, memory, texts):
        for t in texts:
            ack = await memory.call("store_message", {"content": "turn", "author_name": "A", "channel": "c"})
            await memory.call("store_summary", {"summary_text": t, "message_ids": [ack["id"]]})

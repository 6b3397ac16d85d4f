"""pps-importers: history in from ChatGPT and claude.ai exports, and PPS's open export out and back in."""

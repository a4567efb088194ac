"""The searchgrpo training console (Textual). It talks to the core only through typed events and
never imports torch at module import."""

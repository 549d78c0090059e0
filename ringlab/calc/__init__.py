"""Capacity calculators: hardware and model presets, communication volume, KV cache,
roofline, decode batching and pipeline bubbles. Imports nothing but numpy."""

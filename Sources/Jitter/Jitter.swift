// Adaptive jitter buffer: comes with issue 3 (network media).

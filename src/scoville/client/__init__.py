"""The real load generator: OpenAI streaming client, SSE parsing, drivers, worker processes."""

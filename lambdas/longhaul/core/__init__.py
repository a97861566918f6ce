"""The platform's vocabulary, which every part may use: API contracts and typed records, errors, limits,
the clock, settings, table schema, ports, prices and meters, observability. Imports nothing else of longhaul."""

// Placeholder until data/ lands (deleted then).

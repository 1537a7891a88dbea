// Placeholder until train/ lands (deleted then).

// Placeholder until model/ lands (deleted then).

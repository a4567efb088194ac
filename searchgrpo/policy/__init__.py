"""The policy: model loading, prompt encoding, sampling, decoders and log-probabilities."""

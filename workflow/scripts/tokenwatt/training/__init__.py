"""One trial: the model, its optimizer, the training loop with its eval schedule."""

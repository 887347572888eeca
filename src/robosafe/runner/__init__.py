"""Episodes x seeds orchestration, resumable run directories and the results store."""

"""Training: `t2.train.run.run_training` trains a recipe until its first stop rule holds
(t2.train.budget), evaluates its best checkpoint on the test split and writes
RUN/results.json; the loop itself is t2.train.loop."""

"""What both back ends share, without TensorFlow: the tf.data reader (`fast_tfds.read`)
and the Grain loader (`fast_tfds.loader`) import it, and nothing here imports either.
"""

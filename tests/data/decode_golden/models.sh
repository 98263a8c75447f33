# The decoder's golden fixtures (sourced by make.sh, decode.sh and scripts/check_bitwise.sh):
# each model NAME has an experiment MODEL_NAME, a dataset DATASET_NAME and the overrides
# OV_NAME that point it at the data in this folder ($G).
G=${G:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
GOLDEN_MODELS="transformer rnmt punct_rnmt punct_transformer"
MT_TOK="input.tokenizer.cls: WpmTokenizer; input.tokenizer.vocab_filepath: $G/mt/wpm.voc; input.tokenizer.vocab_size: 128"
MT_DEC="task.decoder.target_seq_len: 40; task.decoder.beam_search.num_hyps_per_beam: 4; $MT_TOK"
MODEL_transformer=mt.bible_en_es.TinyTest
MODEL_rnmt=mt.bible_en_es.RNMTTinyTest
MODEL_punct_rnmt=punctuator.codelab.RNMTTinyTest
MODEL_punct_transformer=punctuator.codelab.TransformerTinyTest
DATASET_transformer=Train
DATASET_rnmt=Train
DATASET_punct_rnmt=Test
DATASET_punct_transformer=Test
OV_transformer="input.file_pattern: $G/mt/train.tfrecord@1; $MT_DEC"
OV_rnmt="$OV_transformer"
PUNCT_OV="input.file_pattern: text:$G/punct/train.txt; input.tokenizer.vocab_filepath: $G/punct/wpm.voc; input.tokenizer.vocab_size: 128"
OV_punct_rnmt="$PUNCT_OV"
OV_punct_transformer="$PUNCT_OV"
TEXT_transformer=mt/text.in
TEXT_rnmt=mt/text.in
TEXT_punct_rnmt=punct/text.in
TEXT_punct_transformer=punct/text.in
# golden_var KIND NAME: the value of KIND_NAME (MODEL, DATASET, OV or TEXT).
golden_var() { local v="${1}_$2"; printf '%s' "${!v}"; }

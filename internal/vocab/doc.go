// Package vocab is the vocabulary that edgeq's packages share, each word with one home here: the
// error codes and their HTTP statuses (with the fields a refusal carries), the one reading of a Host
// header and its canonical name, the pooled keyed HMAC and the lower-case hex of the ids it signs,
// the time formats written into answers and logs, the metrics namespace, and clipping what a visitor
// sent before quoting it. It imports only the standard library, so every other package may import it.
package vocab

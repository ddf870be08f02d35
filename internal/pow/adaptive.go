package pow

import "math"

// Adaptive is a difficulty that rises with the rate of joins: Floor while a queue takes at most
// JoinsPerSecond, one more bit (twice the work) for each doubling of the rate beyond it, up to
// Ceiling. A burst of bots pays more per place; a normal drop pays the floor.
type Adaptive struct {
	Floor, Ceiling int
	JoinsPerSecond float64 // the rate above which the difficulty rises; 0 = never
}

// Difficulty is the difficulty at rate joins per second.
func (a Adaptive) Difficulty(rate float64) int {
	if a.Ceiling <= a.Floor || a.JoinsPerSecond <= 0 || !(rate > a.JoinsPerSecond) {
		return a.Floor
	}
	extra := math.Ceil(math.Log2(rate / a.JoinsPerSecond))
	if extra >= float64(a.Ceiling-a.Floor) {
		return a.Ceiling
	}
	return a.Floor + int(extra)
}

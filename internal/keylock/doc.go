// Package keylock hands out one mutex per string key, kept only while some
// caller holds or waits for it, so the set of locks does not grow with every
// key ever used. The checkpoint store locks per pod key with it, the image
// manager per image.
package keylock

// The English text the synthetic tokenizer learns its merges from. Written for this project;
// it only has to be ordinary prose (with contractions, digits, punctuation and line breaks) so
// the merges look like a real English BPE vocabulary. Changing one character changes the merges.

/** Training text for the synthetic byte-level BPE tokenizer. */
export const TRAINING_TEXT = `The harbour town woke slowly on winter mornings. Before the sun cleared the hills, the baker
had already lit his ovens, and the smell of bread drifted down the narrow streets toward the water.
Fishermen walked past the shop with their collars turned up, and most of them stopped for a loaf.
"It's colder than yesterday," the baker would say, and they would nod, because it always was.

On the corner stood a small library with green shutters. It opened at nine and closed at five,
except on Thursdays, when it stayed open until eight so that the people who worked on the boats
could come in after their shifts. The librarian kept a notebook of every book that went out and
every book that came back. She had been keeping it for thirty-one years, and the early pages were
soft and yellow at the edges.

Children came in after school to read about ships, storms and distant countries. They asked
questions that she could not always answer: how deep is the sea, why is the sky blue, where do
the birds go in winter? When she didn't know, she said so, and then they looked it up together.
She believed that the best thing a library could teach was how to find out what you don't know.

In the spring of that year, a young engineer arrived to repair the old lighthouse. The lamp had
failed twice during the winter, and the town council had finally agreed to pay for the work. He
rented a room above the bakery and spent his days on the rocks at the end of the harbour wall,
measuring, drawing and testing. He said the problem was not the lamp itself but the power supply,
which had been patched so many times that nobody could say exactly how it worked any more.

"We'll need new cables," he told the council, "and a new controller. The old one was built in
1962. It has done its job, but it can't do it much longer." The council members looked at one
another. They had hoped for a smaller bill. In the end they voted five to two in favour, and the
work began in April.

The engineer kept careful records. Each evening he wrote down what he had done, what he had
measured and what he planned to do next. When something went wrong, he wrote that down too,
with the time and the reason, if he knew it. "If you don't write it down," he said, "you will
make the same mistake again next year, and you won't even know that you made it before."

By the end of May the new controller was installed. It was a plain grey box, much smaller than
the old one, with a row of green lights on the front. The first night it ran, half the town
walked out along the harbour wall to watch. The beam swept across the water every twelve
seconds, steady and bright, and the boats coming home turned toward it as they always had.

Not everything went smoothly. In June a storm knocked out the power for three days, and the
lighthouse ran on its batteries. The engineer had tested them in April, and they lasted, but only
just. After the storm he asked for a second set of batteries and a small generator. This time the
council agreed without a vote. They had seen the boats come in safely through the storm.

The librarian wrote about the storm in her notebook, which was not something she usually did.
Under the list of books returned that week, she added a line: "Three days without power. The
light did not go out." Later she said it was the only sentence in the notebook that was not
about a book, and that she had written it because some things should be remembered.

Over the summer the engineer taught a class at the library on Thursday evenings. He explained
how electricity moves through a circuit, how a battery stores energy, and how a controller
decides when to switch the lamp on and off. Twelve people came to the first class and twenty to
the last. Some of them were children, some were fishermen, and one was the baker, who said he
wanted to understand his ovens better.

The questions were often better than the answers. Why does a battery get weaker in the cold?
What happens if two wires touch? Can the light be seen from the other side of the bay? The
engineer answered what he could, and when he couldn't, he did what the librarian did: he said
so, and they looked it up together. By the end of the summer the library had ordered six new
books about electricity, and all of them were out on loan.

In September the engineer's work was finished. He packed his tools, paid his rent and said
goodbye to the baker, who gave him a loaf for the journey. At the library he returned the last
book he had borrowed, a history of lighthouses, and the librarian wrote the date in her notebook.
Then she added another line that was not about a book: "He left the light better than he found it."

Years later, people in the town still talked about that summer. They remembered the storm, the
grey box with its green lights, and the Thursday classes. The children who had asked about
batteries grew up, and two of them became engineers. One of them came back to look after the
lighthouse, and the first thing she did was to find the old records and read them from the start.

The records taught her more than any manual could. They showed not only what had been done but
why it had been done, and what had been tried and abandoned. She kept writing them in the same
way: what she did, what she measured, what she planned to do next, and what went wrong. When
people asked her why she bothered, she said that a system you cannot explain is a system you
cannot trust, and that the only way to explain it is to write it down while you still remember.

There is a simple rule hidden in this story. Measure before you change anything, change one
thing at a time, and check the result against what you expected. If the result is different,
find out why before you go on. It is slower at first, but it is much faster in the end, because
you never have to undo a week of work to find a mistake you made on the first day.

The same rule works for bread. The baker learned it from his father, who learned it from his
mother. Weigh the flour, the water, the salt and the yeast. Keep the temperature of the dough
steady. Write down the time the dough goes in and the time it comes out. If a batch goes wrong,
you will know which step to look at. If it goes right, you will know how to do it again.

It works for books as well. A library that does not know which books are on its shelves is not
much of a library. The notebook with the soft yellow pages was not just a list; it was a record
of what the town had read, year after year, and the librarian could tell from it which subjects
were growing and which were fading. More books about boats in the nineteen seventies, more about
computers in the nineties, and more about gardens in recent years, as the town grew older.

When the librarian retired, the town held a small party in the reading room. The baker brought
bread, the fishermen brought fish, and the engineer who looked after the lighthouse brought the
old notebook, which had been moved to the town archive. She read aloud the two lines that were
not about books, and then she added a third: "She taught us to find out what we don't know."

The notebook is still in the archive. Anyone can ask to see it. The pages are fragile now, so
you have to turn them carefully, but the handwriting is clear, and the dates run without a gap
from the first page to the last. It's a quiet record of a quiet town, and it is worth reading.

Numbers matter in records like these. The lighthouse beam turns once every 12 seconds, which is
5 turns a minute, 300 an hour and 7200 a night of ten hours. The new batteries hold 48 hours of
power, twice what the old ones held. The library has 14,500 books, of which about 1,200 are out
on loan at any time. The bakery sells 240 loaves on a normal day and 410 on a market day.

A good record also says what the numbers mean. Twelve seconds is the signature of this
lighthouse: no other light on the coast turns at the same rate, so a sailor who counts the
seconds between flashes knows exactly which light she is looking at. If the controller ever
drifts, the count will be wrong, and a boat could mistake one harbour for another. That is why
the engineer checks the timing every month and writes the result in the log.

Time passes, and people come and go, but the habits stay. Write it down. Check it twice. Say so
when you don't know. Look it up together. These are small rules, and none of them is new, but
a town that keeps them is a town where the light does not go out.
`

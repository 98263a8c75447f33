#!/usr/bin/perl
# asr_synth_jobs.pl - the texts and synthesis jobs of scripts/prepare_asr_synth.sh.
#
#   asr_synth_jobs.pl texts OUT BIBLE_TRAIN BIBLE_TEST FORTUNE_FILE...
#     writes OUT/{bible_train,bible_dev,bible_test,general_train,general_dev,general_test,
#     numbers_train,numbers_dev,numbers_test}.txt: general English sentences from the fortune
#     files (3-30 words, ASCII, no digits; every 20th to test, every 20th offset 10 to dev),
#     spelled-out numbers in short sentences (a fixed generator), the Bible's lines (every
#     100th of the training books to dev; the Test books Ruth, James, Philippians apart).
#   asr_synth_jobs.pl jobs SET MAX TEXT...
#     prints SET's jobs, id<TAB>synth<TAB>voice<TAB>rate<TAB>text<TAB>transcript, taking the
#     TEXT files' lines in turn (one of each, then the next of each: a cut keeps the mix) up to
#     MAX (0: all). The synthesizer, voice and rate of line i depend on SET and i only.
#   asr_synth_jobs.pl lmtext TEXT...
#     prints the TEXT files' lines as the records' transcripts hold them (normalised as the
#     jobs' transcripts, lower-cased): the text of a language model for shallow fusion.
use strict;
use warnings;

my %voices = (
  # training voices: espeak-ng's English voices but the held-out three, with variants but +m4, +m6
  espeak => [map { my $v = $_; map { $_ eq '' ? $v : "$v+$_" } ('', qw(m1 m2 m3 m5 m7 f1 f2 f3 f4 f5 klatt klatt2 klatt4)) }
             qw(en-us en-gb en-gb-scotland en-gb-x-rp en-029)],
  flite => [qw(awb kal16 slt)],
  festival => [qw(kal_diphone ked_diphone)],
  # held out: never in training
  heldout_espeak => [(map { my $v = $_; map { $_ eq '' ? $v : "$v+$_" } ('', qw(m1 f2 klatt)) } qw(en-gb-x-gbclan en-gb-x-gbcwmd en-us-nyc)),
                     (map { ("$_+m4", "$_+m6") } qw(en-us en-gb en-gb-scotland))],
  heldout_flite => [qw(rms)],
  heldout_festival => [qw(cmu_us_slt_arctic_hts)],
);
my %rates = (espeak => [140, 160, 180, 200], flite => [0.9, 1.0, 1.15], festival => [0.9, 1.0, 1.15]);

sub transcript {
  my $tr = uc shift;
  $tr =~ s/[^A-Z0-9\x27 ]+/ /g;
  $tr =~ s/(^| )\x27+|\x27+( |$)/ /g;
  $tr =~ s/\s+/ /g;
  $tr =~ s/^ | $//g;
  return $tr;
}

my @ones = qw(zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
              sixteen seventeen eighteen nineteen);
my @tens = qw(x x twenty thirty forty fifty sixty seventy eighty ninety);
sub say_num {
  my $n = shift;
  return $ones[$n] if $n < 20;
  return $tens[int($n / 10)] . ($n % 10 ? " $ones[$n % 10]" : '') if $n < 100;
  return "$ones[int($n / 100)] hundred" . ($n % 100 ? ' and ' . say_num($n % 100) : '') if $n < 1000;
  return say_num(int($n / 1000)) . ' thousand' . ($n % 1000 ? ($n % 1000 < 100 ? ' and ' : ' ') . say_num($n % 1000) : '');
}

my $lcg = 12345;
# The LCG's high bits (bits 16-30): its low bits have short periods (taken modulo a small
# number they made 2,696 of 2,700 training sentences the same template).
sub rnd { $lcg = ($lcg * 1103515245 + 12345) % 2147483648; return int($lcg / 65536) % $_[0]; }

sub numbers_sentence {
  my @t = (
    sub { 'chapter ' . say_num(1 + rnd(150)) . ' verse ' . say_num(1 + rnd(80)) },
    sub { 'the year ' . say_num(10 + rnd(11)) . ' ' . say_num(10 + rnd(90)) },
    sub { 'he paid ' . say_num(1 + rnd(9999)) . ' dollars for the ' . (qw(house boat horse cart field lamp))[rnd(6)] },
    sub { 'call me at ' . join(' ', map { $ones[rnd(10)] } 1 .. 7) },
    sub { 'there were ' . say_num(2 + rnd(998)) . ' people in the ' . (qw(room city hall square market))[rnd(5)] },
    sub { 'the meeting starts at ' . say_num(1 + rnd(12)) . ' ' . say_num(10 + rnd(50)) },
    sub { my ($a, $b) = (rnd(100), rnd(100)); 'add ' . say_num($a) . ' and ' . say_num($b) . ' to get ' . say_num($a + $b) },
    sub { 'page ' . say_num(1 + rnd(500)) . ' of ' . say_num(500 + rnd(500)) },
  );
  return $t[rnd(scalar @t)]->();
}

sub write_lines {
  my ($path, $lines) = @_;
  open(my $f, '>', "$path.tmp") or die "$path.tmp: $!";
  print $f "$_\n" for @$lines;
  close $f;
  rename("$path.tmp", $path) or die "$path: $!";
}

my $cmd = shift // '';
if ($cmd eq 'texts') {
  my ($out, $btrain, $btest, @fortunes) = @ARGV;
  my (%set, $k);
  open(my $f, '<', $btrain) or die "$btrain: $!";
  my $i = 0;
  while (<$f>) { chomp; next unless /\S/; $i++; push @{$set{$i % 100 == 0 ? 'bible_dev' : 'bible_train'}}, $_; }
  close $f;
  open($f, '<', $btest) or die "$btest: $!";
  while (<$f>) { chomp; push @{$set{bible_test}}, $_ if /\S/; }
  close $f;
  $k = 0;
  for my $file (@fortunes) {
    local $/ = "\n%\n";
    open(my $g, '<', $file) or die "$file: $!";
    while (my $fortune = <$g>) {
      $fortune =~ s/%\n$//;
      next if $fortune =~ /^\s*(--|\t\t)/m;  # attributions and quoted verse layouts
      $fortune =~ s/\s+/ /g;
      for my $s (split /(?<=[.!?])\s+/, $fortune) {
        $s =~ s/^\s+|\s+$//g;
        next if $s =~ /[^\x20-\x7e]|\d|[<>|_\\\/{}\[\]=*@#~^]/;
        my $w = () = $s =~ /\S+/g;
        next if $w < 3 || $w > 30 || $s !~ /[a-z]/;
        my $part = $k % 20 == 0 ? 'general_test' : $k % 20 == 10 ? 'general_dev' : 'general_train';
        push @{$set{$part}}, $s;
        $k++;
      }
    }
    close $g;
  }
  for my $n (1 .. 3000) {
    my $part = $n % 20 == 0 ? 'numbers_test' : $n % 20 == 10 ? 'numbers_dev' : 'numbers_train';
    push @{$set{$part}}, numbers_sentence();
  }
  for my $name (qw(bible_train bible_dev bible_test general_train general_dev general_test numbers_train numbers_dev numbers_test)) {
    write_lines("$out/$name.txt", $set{$name} // []);
  }
} elsif ($cmd eq 'jobs') {
  my ($set, $max, @texts) = @ARGV;
  my @lists;
  for my $t (@texts) {
    open(my $f, '<', $t) or die "$t: $!";
    push @lists, [grep { /\S/ } map { chomp; $_ } <$f>];
    close $f;
  }
  my (@lines, @kinds);
  for (my $j = 0; ; $j++) {
    my $any = 0;
    for my $i (0 .. $#lists) {
      my $l = $lists[$i];
      if ($j < @$l) { push @lines, $l->[$j]; push @kinds, $i; $any = 1; }
    }
    last unless $any;
  }
  splice(@lines, $max) if $max > 0 && @lines > $max;
  my ($n, %k) = (0);
  for my $li (0 .. $#lines) {
    my $say = $lines[$li];
    my ($synth, $pool);
    if ($set =~ /^heldout_(\w+)$/) {
      ($synth, $pool) = ($1, $set);
    } else {
      # training voices: espeak-ng for 4 lines of 10, flite 3, festival 3 (6 / 2 / 2 until
      # 2026-12-07: the model then heard flite's and festival's voices worst, its own
      # training voices too: Test WER 36.5% read by flite against 19.8% by espeak-ng)
      my $c = $n % 10;
      $synth = $c < 4 ? 'espeak' : $c < 7 ? 'flite' : 'festival';
      $pool = $synth;
    }
    my @v = @{$voices{$pool}};
    my @r = @{$rates{$synth}};
    # each synthesizer's lines of each text kind (TEXT file) take its voices in turn, each
    # round its next rate: every voice reads every kind. (One turn over all of a
    # synthesizer's lines gave a pool of 3k voices one kind each, the kinds interleaving
    # with period 3: held-out voices read only digit strings.)
    my $kind = $kinds[$li];
    my $slot = $k{"$synth/$kind"}++;
    my $round = int($slot / @v);
    my $voice = $v[($slot + $kind * int(@v / @lists)) % @v];
    my $rate = $r[($round + $kind) % @r];
    (my $text = $say) =~ s/[\x{201C}\x{201D}]/"/g;
    $text =~ s/\t/ /g;
    my $tr = transcript($text);
    next if $tr eq '';
    printf "%s-%06d\t%s\t%s\t%s\t%s\t%s\n", $set, $n, $synth, $voice, $rate, $text, $tr;
    $n++;
  }
} elsif ($cmd eq 'lmtext') {
  for my $t (@ARGV) {
    open(my $f, '<', $t) or die "$t: $!";
    while (my $line = <$f>) {
      chomp $line;
      $line =~ s/[\x{201C}\x{201D}]/"/g;
      my $tr = transcript($line);
      print lc($tr), "\n" if $tr ne '';
    }
    close $f;
  }
} else {
  die "usage: $0 texts OUT BIBLE_TRAIN BIBLE_TEST FORTUNES... | jobs SET MAX TEXT... | lmtext TEXT...\n";
}
